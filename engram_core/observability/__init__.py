"""What operators see of every Engram process: Prometheus metrics (``metrics``), the Elasticsearch
client's attempts, errors and retries (``es``) and OpenTelemetry traces without memory text
(``tracing``). Below ``memory_app`` and ``tenants``: both record into it."""
