"""The OpenAPI links between the API's operations: which answer names what the next call takes (a
turn's id is a memory to read, forget or trace; a queued write's operation is one to poll). A
client reads them as documentation; schemathesis follows them to chain calls (create, read,
forget, read again) instead of guessing ids."""

from __future__ import annotations

from typing import Any

_SUBJECT = {"external_id": "$request.path.external_id"}
_CREATED_SUBJECT = {"external_id": "$response.body#/external_id"}
_NEW_MEMORY = {**_SUBJECT, "memory_id": "$response.body#/id"}
_SAME_MEMORY = {**_SUBJECT, "memory_id": "$request.path.memory_id"}
_OPERATION = {"uid": "$response.body#/operation/id"}
_WRITES = ("201", "202")

# (operation, answers, link name, target operation, parameters)
LINKS: list[tuple[str, tuple[str, ...], str, str, dict[str, str]]] = [
    *[("subject_create", ("200", "201"), name, target, _CREATED_SUBJECT) for name, target in (
        ("TurnOfSubject", "turn_create"), ("MemoryOfSubject", "memory_create"), ("ImportForSubject", "episodes_import"),
        ("RecallOfSubject", "recall"), ("ExportOfSubject", "subject_export"),
        ("ConsolidationOfSubject", "consolidation_create"), ("EraseSubject", "subject_erase"))],
    *[(source, _WRITES, name, target, _NEW_MEMORY) for source in ("turn_create", "memory_create")
      for name, target in (("ReadMemory", "memory_get"), ("MemoryHistory", "memory_history"),
                           ("ForgetMemory", "memory_forget"))],
    ("memory_create", _WRITES, "PlaybookOutcome", "playbook_outcome", _NEW_MEMORY),
    *[(source, _WRITES, "RecallAfter", "recall", _SUBJECT) for source in ("turn_create", "memory_create")],
    ("turn_create", _WRITES, "ExportAfterTurn", "subject_export", _SUBJECT),
    ("episodes_import", _WRITES, "ExportAfterImport", "subject_export", _SUBJECT),
    ("memory_get", ("200",), "ForgetIt", "memory_forget", {**_SAME_MEMORY, "reason": "user_request"}),
    ("memory_forget", ("200", "202"), "ReadForgotten", "memory_get", _SAME_MEMORY),
    ("memory_forget", ("200", "202"), "ExportAfterForget", "subject_export", _SUBJECT),
    ("subject_erase", ("200", "202"), "ExportAfterErase", "subject_export", _SUBJECT),
    ("consolidation_create", ("200", "202"), "ConsolidationRun", "consolidation_get",
     {**_SUBJECT, "run_id": "$response.body#/run/id"}),
    *[(source, ("202",), "QueuedOperation", "operation_get", _OPERATION)
      for source in ("turn_create", "memory_create", "episodes_import", "memory_forget", "playbook_outcome",
                     "subject_erase")],
]


def openapi_links(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing: ``LINKS`` on the answers they follow from."""
    operations = {op["operationId"]: op for methods in result.get("paths", {}).values()
                  for op in methods.values() if isinstance(op, dict) and "operationId" in op}
    for source, answers, name, target, parameters in LINKS:
        if source not in operations or target not in operations:
            continue
        for answer in answers:
            if response := operations[source].get("responses", {}).get(answer):
                response.setdefault("links", {})[name] = {"operationId": target, "parameters": dict(parameters)}
    return result
