"""AsyncEngramClient: the asyncio twin of EngramClient for the calls the LangGraph store and the
LangChain retriever make (same paths, same retries, same errors)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, cast

import httpx

from engram_client.client import _SAFE_METHODS, EngramClient, _drop_none, _iso, _list_params, _seg
from engram_client.types import ForgetResult, ImportResult, Memory, SubjectPage, WriteResult


class AsyncEngramClient:
    """One agent token, over ``httpx.AsyncClient``; see EngramClient for the retry rules."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0, retries: int = 2,
                 max_wait: float = 30.0, transport: httpx.AsyncBaseTransport | None = None):
        self.retries = retries
        self.max_wait = max_wait
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/") + "/api/v1/", timeout=timeout,
                                       transport=transport,
                                       headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncEngramClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    async def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
                      idempotency_key: str | None = None, write: bool = False, safe: bool = False) -> tuple[int, Any]:
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())} if write else {}
        repeatable = safe or method in _SAFE_METHODS or write
        attempt = 0
        while True:
            try:
                response = await self._http.request(method, path, json=json, params=params, headers=headers)
            except httpx.TransportError as exc:
                if attempt >= self.retries or not (repeatable or isinstance(exc, httpx.ConnectError)):
                    raise
                attempt += 1
                await asyncio.sleep(min(2 ** attempt * 0.25, self.max_wait))
                continue
            if EngramClient._retryable(response) and attempt < self.retries:
                attempt += 1
                await asyncio.sleep(min(float(response.headers.get("Retry-After") or 1), self.max_wait))
                continue
            return EngramClient._decode(response)

    @staticmethod
    def _subject(external_id: str, rest: str = "") -> str:
        return f"subjects/{_seg(external_id)}{rest}"

    async def list_subjects(self, *, prefix: str = "", limit: int = 100, offset: int = 0) -> SubjectPage:
        _, body = await self.request("GET", "subjects", params=_list_params(prefix=prefix, limit=limit, offset=offset))
        return cast(SubjectPage, body)

    async def recall(self, external_id: str, query: str, *, k: int = 10, types: list[str] | None = None,
                     include_superseded: bool = False, explain: bool = False,
                     timezone: str | None = None) -> list[Memory]:
        payload = _drop_none({"query": query, "k": k, "types": types, "include_superseded": include_superseded,
                              "explain": explain, "timezone": timezone})
        _, body = await self.request("POST", self._subject(external_id, "/recall"), json=payload, safe=True)
        return cast(list[Memory], body["memories"])

    async def get_memory(self, external_id: str, memory_id: str) -> Memory:
        _, body = await self.request("GET", self._subject(external_id, f"/memories/{_seg(memory_id)}"))
        return cast(Memory, body)

    async def list_memories(self, external_id: str, memory_type: str, *, key: str | None = None, limit: int = 50,
                            offset: int = 0, include_superseded: bool = False) -> list[Memory]:
        _, body = await self.request("GET", self._subject(external_id, "/memories"), params=_list_params(
            type=memory_type, key=key, limit=limit, offset=offset, include_superseded=include_superseded))
        return cast(list[Memory], body["memories"])

    async def write_fact(self, external_id: str, text: str, *, confidence: float = 1.0,
                         supersedes: list[str] | None = None, contradiction: str = "natural",
                         metadata: dict[str, Any] | None = None, idempotency_key: str | None = None) -> WriteResult:
        payload = _drop_none({"type": "semantic", "text": text, "confidence": confidence, "supersedes": supersedes,
                              "contradiction": contradiction, "metadata": metadata})
        _, body = await self.request("POST", self._subject(external_id, "/memories"), json=payload,
                                     idempotency_key=idempotency_key, write=True)
        return cast(WriteResult, body)

    async def write_playbook(self, external_id: str, trigger: str, steps: str, *, confidence: float = 1.0,
                             supersedes: list[str] | None = None, contradiction: str = "natural",
                             metadata: dict[str, Any] | None = None,
                             idempotency_key: str | None = None) -> WriteResult:
        payload = _drop_none({"type": "procedural", "trigger": trigger, "steps": steps, "confidence": confidence,
                              "supersedes": supersedes, "contradiction": contradiction, "metadata": metadata})
        _, body = await self.request("POST", self._subject(external_id, "/memories"), json=payload,
                                     idempotency_key=idempotency_key, write=True)
        return cast(WriteResult, body)

    async def import_episodes(self, external_id: str, episodes: Iterable[Mapping[str, Any]], *,
                              idempotency_key: str | None = None) -> ImportResult:
        items = [{**e, "occurred_at": _iso(e.get("occurred_at"))} for e in episodes]
        _, body = await self.request("POST", self._subject(external_id, "/episodes:import"),
                                     json={"episodes": items}, idempotency_key=idempotency_key, write=True)
        return cast(ImportResult, body)

    async def forget(self, external_id: str, memory_id: str, reason: str, *, note: str | None = None,
                     cascade: bool = True, idempotency_key: str | None = None) -> ForgetResult:
        params = {"reason": reason, "cascade": "true" if cascade else "false", **({"note": note} if note else {})}
        _, body = await self.request("DELETE", self._subject(external_id, f"/memories/{_seg(memory_id)}"),
                                     params=params, idempotency_key=idempotency_key, write=True)
        return cast(ForgetResult, body)
