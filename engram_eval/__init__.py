"""The product's own measurement: recall quality, consolidation quality, the isolation probe.

The operator commands (``manage.py memory_eval``, ``manage.py isolation_probe``) call into it.
It may import the apps; no app imports it (``tests/test_layers.py``).
"""
