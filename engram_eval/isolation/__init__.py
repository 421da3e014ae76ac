"""The isolation probe (the ship gate): every cross-tenant and cross-user read path, tried with each
end-user's own key directly against Elasticsearch and through Engram's services."""
