"""The small core below the apps: the error family, the Elasticsearch client, capability probes,
the index layout (``es.schema``), the end-user id check (``validation``) and thread pools made
on first use (``threads``).

``memory_app`` and ``tenants`` both import from here and this package imports from neither, so
dependencies point one way. It is a plain package, not a Django app: no models, no settings of
its own (it reads ``django.conf.settings``).
"""
