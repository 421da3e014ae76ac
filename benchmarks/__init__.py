"""Engram's benchmarks: a few suites on one small harness, each run as ``python -m benchmarks
<suite> [args]`` (``scripts/bench <suite> [args]`` starts the services it needs first).

- ``harness``, ``machine``, ``corpus``, ``load``: no Engram code (the process's environment,
  percentiles, results; the machine's speed; the synthetic corpus; an HTTP load generator);
- ``engram``: every piece of Engram the suites call, and the run's clean-up; ``loading``: the
  corpus put into Engram;
- the suites: ``latency``, ``http`` (http_load), ``scale``, ``import`` (bulk_import), ``peers``,
  ``inspector`` (inspector_pages), ``machine``, ``embedder`` (embedder_memory).
"""
