"""A small typed client for Engram's REST API (``/api/v1/``).

    from engram_client import EngramClient

    with EngramClient("https://engram.example.com", token="eng_…") as engram:
        turn = engram.turn("user-42", "My router keeps dropping the connection")
        for memory in turn["recall"] or []:
            print(memory["memory_type"], memory.get("text"))
"""

from engram_client.aio import AsyncEngramClient
from engram_client.client import EngramAPIError, EngramClient
from engram_client.types import (
    EraseResult,
    ErrorBody,
    Export,
    ForgetResult,
    History,
    ImportResult,
    Memory,
    Operation,
    Subject,
    SubjectPage,
    TurnResult,
    UsageDay,
    WriteResult,
)

__all__ = [
    "AsyncEngramClient",
    "EngramAPIError",
    "EngramClient",
    "EraseResult",
    "ErrorBody",
    "Export",
    "ForgetResult",
    "History",
    "ImportResult",
    "Memory",
    "Operation",
    "Subject",
    "SubjectPage",
    "TurnResult",
    "UsageDay",
    "WriteResult",
]
