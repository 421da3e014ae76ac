"""The agent-facing REST API, ``/api/v1/``: thin views over memory_app's services and selectors."""
