"""EngramClient: one method per endpoint, typed results, one exception type."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast
from urllib.parse import quote

import httpx

from engram_client.types import (
    EraseResult,
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

_RETRY_STATUSES = (429, 503)
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class EngramAPIError(Exception):
    """An error answer of the API (``{"error": {"code", "message", "details"}}``)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None,
                 retry_after: float | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after


def _seg(value: str) -> str:
    return quote(value, safe="")


def _iso(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def _drop_none(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _list_params(**params: Any) -> dict[str, Any]:
    """Query parameters as the API reads them (booleans as true/false), None left out."""
    return {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in _drop_none(params).items()}


class EngramClient:
    """A client for one agent token.

    Writes carry an ``Idempotency-Key`` (yours, or a fresh UUID per call), so the client's own
    retries (``retries`` times, on connection errors, 429, 503 and "this key's first request is
    still running", honouring Retry-After up to ``max_wait`` seconds) never write twice.
    ``transport`` is passed to httpx (tests use a WSGI transport).
    """

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0, retries: int = 2,
                 max_wait: float = 30.0, transport: httpx.BaseTransport | None = None):
        self.retries = retries
        self.max_wait = max_wait
        self._http = httpx.Client(base_url=base_url.rstrip("/") + "/api/v1/", timeout=timeout, transport=transport,
                                  headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EngramClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
                idempotency_key: str | None = None, write: bool = False, safe: bool = False) -> tuple[int, Any]:
        """Send one request (retrying as configured); returns (status, decoded body) or raises EngramAPIError.

        A request that may have reached the server (a timeout, a dropped connection) is sent again
        only when sending it twice is harmless: a read (GET, or ``safe`` for reads sent as POST)
        or a write carrying an Idempotency-Key, which the server answers with the first response.
        """
        headers = {}
        if write:
            headers["Idempotency-Key"] = idempotency_key or str(uuid.uuid4())
        repeatable = safe or method in _SAFE_METHODS or "Idempotency-Key" in headers
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path, json=json, params=params, headers=headers)
            except httpx.TransportError as exc:
                # A connection never made carried nothing: always safe to try again.
                if attempt >= self.retries or not (repeatable or isinstance(exc, httpx.ConnectError)):
                    raise
                attempt += 1
                time.sleep(min(2 ** attempt * 0.25, self.max_wait))
                continue
            if self._retryable(response) and attempt < self.retries:
                attempt += 1
                time.sleep(min(float(response.headers.get("Retry-After") or 1), self.max_wait))
                continue
            return self._decode(response)

    @staticmethod
    def _retryable(response: httpx.Response) -> bool:
        if response.status_code in _RETRY_STATUSES:
            return True
        # The same write is still running under this Idempotency-Key: its answer will be ours.
        return response.status_code == 409 and "Retry-After" in response.headers

    @staticmethod
    def _decode(response: httpx.Response) -> tuple[int, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            error = (body or {}).get("error") if isinstance(body, dict) else None
            error = error or {"code": "http_error", "message": response.text[:500] or response.reason_phrase}
            retry_after = response.headers.get("Retry-After")
            raise EngramAPIError(response.status_code, error.get("code", "error"), error.get("message", ""),
                                 error.get("details"), float(retry_after) if retry_after else None)
        return response.status_code, body

    def _subject(self, external_id: str, rest: str = "") -> str:
        return f"subjects/{_seg(external_id)}{rest}"

    # ------------------------------------------------------------ end-users

    def create_subject(self, external_id: str, *, display_name: str = "",
                       idempotency_key: str | None = None) -> Subject:
        """Create an end-user (tenant:admin). Existing ones are returned as they are."""
        _, body = self.request("POST", "subjects", json={"external_id": external_id, "display_name": display_name},
                               idempotency_key=idempotency_key, write=True)
        return cast(Subject, body)

    def list_subjects(self, *, prefix: str = "", limit: int = 100, offset: int = 0) -> SubjectPage:
        """The tenant's end-users by external id, each with its memory counts per type (memory:read)."""
        _, body = self.request("GET", "subjects", params=_list_params(prefix=prefix, limit=limit, offset=offset))
        return cast(SubjectPage, body)

    def erase_subject(self, external_id: str, *, idempotency_key: str | None = None) -> EraseResult:
        """Delete every memory and key of an end-user (memory:forget)."""
        _, body = self.request("DELETE", self._subject(external_id), idempotency_key=idempotency_key, write=True)
        return cast(EraseResult, body)

    def export(self, external_id: str) -> Export:
        _, body = self.request("GET", self._subject(external_id, "/export"))
        return cast(Export, body)

    # ------------------------------------------------------------ turns and recall

    def turn(self, external_id: str, text: str, *, occurred_at: datetime | str | None = None,
             session_id: str | None = None, context: str | None = None, metadata: dict[str, Any] | None = None,
             k: int = 5, types: list[str] | None = None, include_superseded: bool = False, explain: bool = False,
             timezone: str | None = None, idempotency_key: str | None = None) -> TurnResult:
        """Store the user's turn verbatim and recall for it (the turn itself left out). ``timezone``:
        the user's IANA zone, in whose calendar days the recall reads dates ("yesterday")."""
        payload = _drop_none({"text": text, "occurred_at": _iso(occurred_at), "session_id": session_id,
                              "context": context, "metadata": metadata, "k": k, "types": types,
                              "include_superseded": include_superseded, "explain": explain, "timezone": timezone})
        _, body = self.request("POST", self._subject(external_id, "/turns"), json=payload,
                               idempotency_key=idempotency_key, write=True)
        return cast(TurnResult, body)

    def recall(self, external_id: str, query: str, *, k: int = 10, types: list[str] | None = None,
               since: datetime | str | None = None, until: datetime | str | None = None,
               include_superseded: bool = False, explain: bool = False, timezone: str | None = None,
               as_of: datetime | str | None = None) -> list[Memory]:
        payload = _drop_none({"query": query, "k": k, "types": types, "since": _iso(since), "until": _iso(until),
                              "include_superseded": include_superseded, "explain": explain, "timezone": timezone,
                              "as_of": _iso(as_of)})
        _, body = self.request("POST", self._subject(external_id, "/recall"), json=payload, safe=True)
        return cast(list[Memory], body["memories"])

    # ------------------------------------------------------------ memories

    def write_fact(self, external_id: str, text: str, *, confidence: float = 1.0, supersedes: list[str] | None = None,
                   contradiction: str = "natural", supporting_episode_ids: list[str] | None = None,
                   metadata: dict[str, Any] | None = None, idempotency_key: str | None = None) -> WriteResult:
        """Write a semantic fact; ``supersedes`` replaces older facts (``contradiction``: natural | harsh | fulfilled, a plan done)."""
        payload = _drop_none({"type": "semantic", "text": text, "confidence": confidence, "supersedes": supersedes,
                              "contradiction": contradiction, "supporting_episode_ids": supporting_episode_ids,
                              "metadata": metadata})
        _, body = self.request("POST", self._subject(external_id, "/memories"), json=payload,
                               idempotency_key=idempotency_key, write=True)
        return cast(WriteResult, body)

    def write_playbook(self, external_id: str, trigger: str, steps: str, *, confidence: float = 1.0,
                       supersedes: list[str] | None = None, contradiction: str = "natural",
                       metadata: dict[str, Any] | None = None, idempotency_key: str | None = None) -> WriteResult:
        payload = _drop_none({"type": "procedural", "trigger": trigger, "steps": steps, "confidence": confidence,
                              "supersedes": supersedes, "contradiction": contradiction, "metadata": metadata})
        _, body = self.request("POST", self._subject(external_id, "/memories"), json=payload,
                               idempotency_key=idempotency_key, write=True)
        return cast(WriteResult, body)

    def get_memory(self, external_id: str, memory_id: str) -> Memory:
        _, body = self.request("GET", self._subject(external_id, f"/memories/{_seg(memory_id)}"))
        return cast(Memory, body)

    def list_memories(self, external_id: str, memory_type: str, *, key: str | None = None, limit: int = 50,
                      offset: int = 0, include_superseded: bool = False) -> list[Memory]:
        """The end-user's memories of one type, newest written first; ``key``: those you stored under
        your own key (an imported episode's id, a fact's or playbook's ``metadata["key"]``)."""
        _, body = self.request("GET", self._subject(external_id, "/memories"), params=_list_params(
            type=memory_type, key=key, limit=limit, offset=offset, include_superseded=include_superseded))
        return cast(list[Memory], body["memories"])

    def history(self, external_id: str, memory_id: str) -> History:
        _, body = self.request("GET", self._subject(external_id, f"/memories/{_seg(memory_id)}/history"))
        return cast(History, body)

    def forget(self, external_id: str, memory_id: str, reason: str, *, note: str | None = None,
               cascade: bool = True, idempotency_key: str | None = None) -> ForgetResult:
        """Forget a memory (and, for an episode, what was derived from it alone). ``reason``: one of
        the API's codes (user_request, inaccurate, sensitive, legal, retention, other)."""
        params = {"reason": reason, "cascade": "true" if cascade else "false", **({"note": note} if note else {})}
        _, body = self.request("DELETE", self._subject(external_id, f"/memories/{_seg(memory_id)}"),
                               params=params, idempotency_key=idempotency_key, write=True)
        return cast(ForgetResult, body)

    def record_outcome(self, external_id: str, playbook_id: str, success: bool, *, refined_steps: str | None = None,
                       idempotency_key: str | None = None) -> WriteResult:
        _, body = self.request("POST", self._subject(external_id, f"/playbooks/{_seg(playbook_id)}/outcome"),
                               json=_drop_none({"success": success, "refined_steps": refined_steps}),
                               idempotency_key=idempotency_key, write=True)
        return cast(WriteResult, body)

    def import_episodes(self, external_id: str, episodes: Iterable[Mapping[str, Any]], *,
                        idempotency_key: str | None = None) -> ImportResult:
        """Bulk-import historical episodes (each: text, occurred_at, optional role/session_id/context/metadata/id)."""
        items = [{**e, "occurred_at": _iso(e.get("occurred_at"))} for e in episodes]
        _, body = self.request("POST", self._subject(external_id, "/episodes:import"), json={"episodes": items},
                               idempotency_key=idempotency_key, write=True)
        return cast(ImportResult, body)

    # ------------------------------------------------------------ tenant-wide

    def create_catalog_entry(self, title: str, text: str, *, metadata: dict[str, Any] | None = None,
                             idempotency_key: str | None = None) -> Memory:
        _, body = self.request("POST", "catalog/entries", json=_drop_none({"title": title, "text": text,
                                                                           "metadata": metadata}),
                               idempotency_key=idempotency_key, write=True)
        return cast(Memory, body)

    def usage(self, *, days: int = 30) -> list[UsageDay]:
        """The tenant's usage per day, newest first (tenant:admin)."""
        _, body = self.request("GET", "usage", params={"days": days})
        return cast(list[UsageDay], body["days"])

    def operation(self, operation_id: str) -> Operation:
        """A queued write's state (pending, done, failed or cancelled)."""
        _, body = self.request("GET", f"operations/{_seg(operation_id)}")
        return cast(Operation, body)
