"""The product's own measurement: recall quality, consolidation quality, the isolation probe and
the canary scan.

A Django app for its operator commands (``manage.py memory_eval``, ``isolation_probe``,
``canary_scan``, in ``management/commands/``). It may import the apps; no app imports it
(``tests/test_layers.py``).
"""
