"""EngramStore: LangGraph's long-term memory (``BaseStore``) kept in Engram.

Namespaces (after an optional fixed ``namespace_prefix``, e.g. ``("memories",)``):

    (<end-user>, <type>)   items of one end-user and one memory type
    (<end-user>,)          put/get/delete: the store's ``default_type``; search: every type

``<end-user>`` is the end-user's ``external_id`` as a namespace label: LangGraph refuses "." in a
label, so "." is written "%2E" and "%" is written "%25" (``label_of``/``external_id_of``).
``<type>`` is ``semantic`` (facts), ``episodic`` (episodes), ``procedural`` (playbooks) or, for
search only, ``catalog`` (the tenant's shared entries).

- ``put``: a fact (``semantic``) from ``value["text"]``, an episode (``episodic``, stored as an
  imported episode whose id is the key), a playbook (``procedural``, ``value["trigger"]`` and
  ``value["steps"]``; the episode's id is ``episode_id(key)``); a value without those fields is stored with its fields as the text. The
  rest of the value and the key go into the memory's metadata (4 KB of JSON at most), so ``get``
  gives the value back as it was put. A put on an existing key supersedes the fact or playbook (the
  old one stays in Engram's history) and replaces the episode (the old one is forgotten).
- ``get``: the current memory stored under the key (or, for a memory written another way, its
  Engram id as the key).
- ``search`` with a ``query``: Engram's recall over the end-user's memories of the namespace's
  type (all types and the catalog without one); each result is an ``EngramSearchItem`` whose
  ``memory`` is the recalled memory (id, type, score and, with ``explain=True``, its explanation).
  Without a query: the newest memories first. ``filter`` matches the value's fields as LangGraph's
  own stores do. Search names one end-user: Engram recalls for one person at a time.
- ``delete``: a forget, with ``forget_reason`` (one of the API's reason codes).
- ``list_namespaces``: ``(<end-user>, <type>)`` for every end-user and each type they hold.

Within one ``batch``, reads see the store as it was before the batch and puts apply after them,
the last put of a key winning, as in LangGraph's InMemoryStore. Needs ``langgraph`` (the
``langgraph`` extra); the token needs memory:read, memory:write and memory:forget.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
import weakref
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - exercised by the test that hides langgraph
    raise ImportError("engram_client.langgraph needs LangGraph: pip install langgraph "
                      "(engram_client itself does not)") from exc

from engram_client._plans import Call, Plan, arun, run
from engram_client.aio import AsyncEngramClient
from engram_client.client import EngramAPIError, EngramClient

TYPES = ("semantic", "episodic", "procedural")
SEARCH_TYPES = (*TYPES, "catalog")
MAX_K = 100  # the API's largest recall
_LIST_PAGE = 200
_ENGRAM_ID = re.compile(r"[0-9a-f]{32}")  # the ids Engram gives the memories it creates
_EPISODE_KEYS = uuid.UUID("0b5f4c1e-6a1d-4f0e-9c55-7d3e2a1b9f40")


def episode_id(key: str) -> str:
    """The id an episode put under ``key`` is imported with (any key becomes a valid id; the key
    itself is kept in the episode's metadata)."""
    return str(uuid.uuid5(_EPISODE_KEYS, key))


def label_of(external_id: str) -> str:
    """The namespace label of an end-user's external id ("." is not allowed in a label)."""
    return external_id.replace("%", "%25").replace(".", "%2E")


def external_id_of(label: str) -> str:
    return label.replace("%2E", ".").replace("%2e", ".").replace("%25", "%")


class EngramSearchItem(SearchItem):
    """A search result, with the Engram memory it came from (``memory``: id, memory_type, score,
    and ``explain`` when the store explains)."""

    def __init__(self, *, memory: dict[str, Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.memory = memory


class EngramStore(BaseStore):
    """A LangGraph store over Engram's REST API (see the module's docstring for the mapping).

    ``EngramStore("https://engram.example.com", token)``, or with clients of your own
    (``client``: an EngramClient for ``batch``; ``aclient``: an AsyncEngramClient for ``abatch``).
    """

    def __init__(self, base_url: str | None = None, token: str | None = None, *,
                 client: EngramClient | None = None, aclient: AsyncEngramClient | None = None,
                 namespace_prefix: tuple[str, ...] = (), default_type: str = "semantic",
                 forget_reason: str = "user_request", explain: bool = False, timeout: float = 30.0):
        if default_type not in TYPES:
            raise ValueError(f"default_type must be one of {TYPES}")
        if client is None and (base_url is None or token is None):
            raise ValueError("give base_url and token, or the client(s) to use")
        self._client = client or EngramClient(base_url, token, timeout=timeout)  # type: ignore[arg-type]
        self._aclient = aclient
        # An httpx.AsyncClient belongs to the event loop it first ran in: one per loop, unless given.
        self._aclients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._connection = (base_url, token, timeout)
        self.namespace_prefix = tuple(namespace_prefix)
        self.default_type = default_type
        self.forget_reason = forget_reason
        self.explain = explain

    # ------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run(self._batch_plan(list(ops)), self._client)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await arun(self._batch_plan(list(ops)), self._async_client())

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        """Close the async client of the running event loop."""
        client = self._aclient or self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def _async_client(self) -> AsyncEngramClient:
        if self._aclient is not None:
            return self._aclient
        loop = asyncio.get_running_loop()
        if (client := self._aclients.get(loop)) is None:
            base_url, token, timeout = self._connection
            if base_url is None or token is None:
                raise ValueError("async calls need base_url and token, or an AsyncEngramClient (aclient)")
            client = self._aclients[loop] = AsyncEngramClient(base_url, token, timeout=timeout)
        return client

    # ------------------------------------------------------------ namespaces

    def _place(self, namespace: tuple[str, ...], *, typed: bool) -> tuple[str, str | None]:
        """(external_id, memory type or None) a namespace names."""
        size = len(self.namespace_prefix)
        if tuple(namespace[:size]) != self.namespace_prefix or not size < len(namespace) <= size + 2:
            raise ValueError(f"namespace {namespace!r} is not {self.namespace_prefix!r} + (<end-user>,) "
                             f"or + (<end-user>, <type>)")
        rest = namespace[size:]
        memory_type = rest[1] if len(rest) == 2 else (self.default_type if typed else None)
        allowed = TYPES if typed else SEARCH_TYPES
        if memory_type is not None and memory_type not in allowed:
            raise ValueError(f"{memory_type!r} is not a memory type here: one of {allowed}")
        return external_id_of(rest[0]), memory_type

    def _namespace(self, external_id: str, memory_type: str) -> tuple[str, ...]:
        return (*self.namespace_prefix, label_of(external_id), memory_type)

    # ------------------------------------------------------------ one batch

    def _batch_plan(self, ops: list[Op]) -> Plan[list[Result]]:
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = yield from self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = yield from self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._list_namespaces(op)
            elif isinstance(op, PutOp):
                self._place(op.namespace, typed=True)  # a bad namespace fails before anything is written
                puts.pop((op.namespace, op.key), None)
                puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"unknown operation {type(op).__name__}")
        for op in puts.values():
            yield from self._put(op)
        return results

    def _current(self, external_id: str, memory_type: str, key: str) -> Plan[dict[str, Any] | None]:
        try:
            lookup = episode_id(key) if memory_type == "episodic" else key
            found = yield Call("list_memories", (external_id, memory_type), {"key": lookup, "limit": 1})
        except EngramAPIError as exc:
            if exc.status == 404:  # no such end-user yet
                return None
            raise
        if found:
            return found[0]
        if memory_type == "episodic" or not _ENGRAM_ID.fullmatch(key):
            return None
        try:  # a memory written another way is addressed by its Engram id
            memory = yield Call("get_memory", (external_id, key))
        except EngramAPIError as exc:
            if exc.status in (400, 404):
                return None
            raise
        mine = memory.get("memory_type") == memory_type and not memory.get("superseded_by")
        return memory if mine and (memory.get("metadata") or {}).get("key") in (None, key) else None

    def _get(self, op: GetOp) -> Plan[Item | None]:
        external_id, memory_type = self._place(op.namespace, typed=True)
        memory = yield from self._current(external_id, memory_type, op.key)
        return None if memory is None else _item(Item, self._namespace(external_id, memory_type), memory)

    def _put(self, op: PutOp) -> Plan[None]:
        external_id, memory_type = self._place(op.namespace, typed=True)
        existing = yield from self._current(external_id, memory_type, op.key)
        if op.value is None:
            if existing is not None:
                yield Call("forget", (external_id, existing["id"], self.forget_reason))
            return None
        fields, rest, text_fields = _split(memory_type, dict(op.value))
        if existing is not None and _value(existing) == dict(op.value):
            return None  # the same value again: nothing to write
        created = _meta(existing).get("created_at") if existing else None
        metadata = {"key": op.key, "langgraph": {"value": rest, "text_fields": text_fields,
                                                 "created_at": created or _now()}}
        _check_metadata(metadata)
        if memory_type == "episodic":
            if existing is not None:  # an event is not superseded: the old one goes
                yield Call("forget", (external_id, existing["id"], "other"),
                           {"note": "replaced through the LangGraph store"})
            yield Call("import_episodes", (external_id, [{"id": episode_id(op.key), "text": fields["text"],
                                                          "occurred_at": _now(), "metadata": metadata}]))
        elif memory_type == "semantic":
            yield Call("write_fact", (external_id, fields["text"]), {
                "supersedes": [existing["id"]] if existing else None, "metadata": metadata})
        else:
            yield Call("write_playbook", (external_id, fields["trigger"], fields["steps"]), {
                "supersedes": [existing["id"]] if existing else None, "metadata": metadata})
        return None

    def _search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        external_id, memory_type = self._place(op.namespace_prefix, typed=False)
        wanted = op.offset + op.limit
        try:
            if op.query:
                hits = yield Call("recall", (external_id, op.query), {
                    "k": min(MAX_K, wanted if not op.filter else MAX_K),
                    "types": [memory_type] if memory_type else None, "explain": self.explain})
            else:
                hits = []
                for t in [memory_type] if memory_type else TYPES:
                    if t == "catalog":
                        continue
                    hits += yield Call("list_memories", (external_id, t),
                                       {"limit": min(_LIST_PAGE, wanted if not op.filter else _LIST_PAGE)})
                hits.sort(key=lambda m: m.get("created_at") or "", reverse=True)
        except EngramAPIError as exc:
            if exc.status == 404:  # an end-user with nothing stored yet
                return []
            raise
        items = [_item(EngramSearchItem, self._namespace(external_id, m.get("memory_type") or memory_type), m,
                       score=m.get("score")) for m in hits]
        if op.filter:
            items = [i for i in items if _matches(i.value, op.filter)]
        return items[op.offset:op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        namespaces: list[tuple[str, ...]] = []
        offset: int | None = 0
        while offset is not None:
            page = yield Call("list_subjects", (), {"limit": 500, "offset": offset})
            for subject in page["subjects"]:
                namespaces += [self._namespace(subject["external_id"], t) for t in TYPES
                               if subject["memory_counts"].get(t)]
            offset = page["next_offset"]
        if op.match_conditions:
            namespaces = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            namespaces = sorted({ns[:op.max_depth] for ns in namespaces})
        else:
            namespaces = sorted(namespaces)
        return namespaces[op.offset:op.offset + op.limit]


# ---------------------------------------------------------------- values <-> memories

_TEXT_FIELDS = {"semantic": ("text",), "episodic": ("text",), "procedural": ("trigger", "steps")}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _meta(memory: Mapping[str, Any] | None) -> dict[str, Any]:
    metadata = (memory or {}).get("metadata") or {}
    stored = metadata.get("langgraph") if isinstance(metadata, dict) else None
    return stored if isinstance(stored, dict) else {}


def _as_text(value: Mapping[str, Any]) -> str:
    """A value without a text field, as text recall can match: its fields, one per line."""
    return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)}"
                     for k, v in value.items()) or "{}"


def _split(memory_type: str, value: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], list[str]]:
    """(the memory's own text fields, the rest of the value, which fields of the value were used)."""
    names = _TEXT_FIELDS[memory_type]
    if all(isinstance(value.get(n), str) and value[n].strip() for n in names):
        return {n: value[n] for n in names}, {k: v for k, v in value.items() if k not in names}, list(names)
    if memory_type == "procedural":
        raise ValueError("a playbook's value needs non-empty 'trigger' and 'steps' strings")
    return {"text": _as_text(value)}, value, []


def _check_metadata(metadata: dict[str, Any]) -> None:
    size = len(json.dumps(metadata, ensure_ascii=False).encode())
    if size > 4096:
        raise ValueError(f"the value's fields beyond its text take {size} bytes as JSON; Engram keeps at most 4096")


def _value(memory: Mapping[str, Any]) -> dict[str, Any]:
    stored = _meta(memory)
    if "value" in stored:
        return {**stored["value"], **{n: memory.get(n) for n in stored.get("text_fields") or ()}}
    if memory.get("memory_type") == "procedural":
        return {"trigger": memory.get("trigger"), "steps": memory.get("steps")}
    if memory.get("memory_type") == "catalog":
        return {"title": memory.get("title"), "text": memory.get("text")}
    return {"text": memory.get("text")}


def _stamp(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(value) if value else datetime.now(UTC)
    except (TypeError, ValueError):
        return datetime.now(UTC)


def _item(cls, namespace: tuple[str, ...], memory: dict[str, Any], **extra: Any):
    metadata = memory.get("metadata") or {}
    key = (metadata.get("key") if isinstance(metadata, dict) else None) or memory.get("client_id") or memory["id"]
    kwargs = dict(namespace=namespace, key=key, value=_value(memory),
                  created_at=_stamp(_meta(memory).get("created_at") or memory.get("created_at")),
                  updated_at=_stamp(memory.get("created_at")), **extra)
    return cls(memory=memory, **kwargs) if cls is EngramSearchItem else cls(**kwargs)


# ---------------------------------------------------------------- LangGraph's filter and namespace rules


def _matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:  # LangGraph's name
    return all(_compare(value.get(k), v) for k, v in filter.items())


def _compare(item: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(item, k, v) for k, v in wanted.items())
        return isinstance(item, dict) and all(_compare(item.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(item, list | tuple) and len(item) == len(wanted)
                and all(_compare(a, b) for a, b in zip(item, wanted, strict=True)))
    return item == wanted


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return value == operand
    if operator == "$ne":
        return value != operand
    comparisons = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if operator not in comparisons:
        raise ValueError(f"unsupported filter operator {operator}")
    try:
        return comparisons[operator](float(value), float(operand))
    except (TypeError, ValueError):
        return False


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)
