"""Consolidation: episodes become facts and playbooks, deduplicated and superseded.

Public entry points: services.consolidation_run / consolidation_request / consolidation_dispatch
(writes), selectors.consolidation_runs_list / consolidation_run_get (reads). Extractors live in
``extractors`` behind one interface; ``resolve`` decides, ``apply`` holds every write.
"""
