"""EngramRetriever: LangChain's ``BaseRetriever`` over Engram's recall for one end-user.

    retriever = EngramRetriever(base_url="https://engram.example.com", token="eng_…", external_id="user-42")
    docs = retriever.invoke("where does the user live?")

Each ``Document``'s ``page_content`` is the memory's text (a playbook: its trigger and steps), and
its ``metadata`` holds Engram's ``id``, ``memory_type``, ``score`` and the memory's other fields
(``explain`` too, with ``explain=True``). ``id`` is the memory id as well. Sync and async
(``invoke``/``ainvoke``). Needs ``langchain-core`` (the ``langchain`` extra); the token needs
memory:read.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised by the test that hides langchain-core
    raise ImportError("engram_client.langchain needs LangChain: pip install langchain-core "
                      "(engram_client itself does not)") from exc

from engram_client.aio import AsyncEngramClient
from engram_client.client import EngramClient

_CONTENT_FIELDS = ("text", "trigger", "steps")


def memory_document(memory: dict[str, Any]) -> Document:
    """A recalled memory as a LangChain Document (content: its text; metadata: the rest)."""
    if memory.get("memory_type") == "procedural":
        content = f"{memory.get('trigger', '')}\n{memory.get('refined_steps') or memory.get('steps', '')}".strip()
    else:
        content = memory.get("text") or ""
    metadata = {k: v for k, v in memory.items() if k not in _CONTENT_FIELDS}
    return Document(id=memory["id"], page_content=content, metadata=metadata)


class EngramRetriever(BaseRetriever):
    """The end-user ``external_id``'s memories most relevant to a query (Engram's recall)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    external_id: str
    base_url: str | None = None
    token: str | None = None
    k: int = 5
    types: list[str] | None = None  # episodic, semantic, procedural, catalog (default: all)
    include_superseded: bool = False
    explain: bool = False
    timezone: str | None = None
    client: EngramClient | None = None
    aclient: AsyncEngramClient | None = None
    _sync: EngramClient | None = PrivateAttr(default=None)
    # An httpx.AsyncClient belongs to the event loop it first ran in: one per loop, unless given.
    _async: weakref.WeakKeyDictionary = PrivateAttr(default_factory=weakref.WeakKeyDictionary)

    def model_post_init(self, context: Any) -> None:
        if (self.client is None or self.aclient is None) and (self.base_url is None or self.token is None):
            raise ValueError("give base_url and token, or the clients to use")

    def _client(self) -> EngramClient:
        if self.client is not None:
            return self.client
        if self._sync is None:
            self._sync = EngramClient(self.base_url, self.token)  # type: ignore[arg-type]
        return self._sync

    def _aclient(self) -> AsyncEngramClient:
        if self.aclient is not None:
            return self.aclient
        loop = asyncio.get_running_loop()
        if (client := self._async.get(loop)) is None:
            client = self._async[loop] = AsyncEngramClient(self.base_url, self.token)  # type: ignore[arg-type]
        return client

    def _options(self) -> dict[str, Any]:
        return {"k": self.k, "types": self.types, "include_superseded": self.include_superseded,
                "explain": self.explain, "timezone": self.timezone}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [memory_document(m) for m in self._client().recall(self.external_id, query, **self._options())]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        memories = await self._aclient().recall(self.external_id, query, **self._options())
        return [memory_document(m) for m in memories]
