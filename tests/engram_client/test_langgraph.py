"""EngramStore against a live Engram server: LangGraph's own store contract (the same operations
give what LangGraph's reference InMemoryStore gives), a compiled graph whose deterministic nodes
write and read memory through it (sync and async), and what each operation does in Engram."""

from __future__ import annotations

import asyncio
import uuid
from typing import TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import GetOp, PutOp
from langgraph.store.memory import InMemoryStore

from engram_client import EngramClient
from engram_client.langgraph import EngramSearchItem, EngramStore, episode_id, external_id_of, label_of


@pytest.fixture
def store(live_engram, live_token):
    store = EngramStore(live_engram.url, live_token)
    yield store
    store.close()


@pytest.fixture
def client(live_engram, live_token):
    with EngramClient(live_engram.url, live_token) as engram:
        yield engram


def _user() -> str:
    return f"lg.user-{uuid.uuid4().hex[:8]}@example.com"  # a "." LangGraph refuses in a label


def _seen(items) -> list[tuple]:
    return [(i.namespace, i.key, i.value) for i in items]


def _run_contract(store, user: str) -> list:
    """The same calls against any BaseStore; what each returned."""
    facts, episodes = (user, "semantic"), (user, "episodic")
    out = []
    store.put(facts, "home", {"text": "The user lives in Lisbon.", "source": "chat", "rank": 2})
    store.put(facts, "diet", {"text": "The user is vegetarian.", "source": "form", "rank": 5})
    store.put(facts, "plain", {"colour": "green", "rank": 1})  # no text field
    out.append(store.get(facts, "home").value)
    out.append(store.get(facts, "plain").value)
    out.append(store.get(facts, "missing"))
    store.put(facts, "home", {"text": "The user moved to Porto.", "source": "chat", "rank": 3})
    out.append(store.get(facts, "home").value)
    out.append(sorted(_seen(store.search(facts))))
    out.append(sorted(_seen(store.search(facts, filter={"source": "chat"}))))
    out.append(sorted(_seen(store.search(facts, filter={"rank": {"$gte": 3}}))))
    out.append(len(store.search(facts, limit=2)))
    store.delete(facts, "diet")
    out.append(store.get(facts, "diet"))
    store.put(episodes, "turn one", {"text": "I booked a table for Friday.", "mood": "happy"})
    out.append(store.get(episodes, "turn one").value)
    # In one batch, reads see the store as it was; the last put of a key wins.
    out.append([None if r is None else getattr(r, "value", r) for r in store.batch([
        GetOp(facts, "home"), PutOp(facts, "home", {"text": "The user lives in Faro."}),
        PutOp(facts, "home", {"text": "The user lives in Braga."}), GetOp(facts, "home")])])
    out.append(store.get(facts, "home").value)
    out.append(sorted(ns for ns in store.list_namespaces(prefix=(label_of(user),))))
    out.append(store.list_namespaces(prefix=(label_of(user),), max_depth=1))
    return out


def test_the_store_gives_what_langgraphs_reference_store_gives(store):
    user = _user()
    reference = InMemoryStore()
    # Namespaces carry the end-user as a label (LangGraph refuses "." in one).
    assert external_id_of(label_of(user)) == user
    assert _run_contract(store, label_of(user)) == _run_contract(reference, label_of(user))


def test_async_calls_give_what_sync_calls_give(store):
    user = label_of(_user())
    ns = (user, "semantic")

    async def scenario():
        await store.aput(ns, "k1", {"text": "The user's cat is called Miso.", "n": 1})
        first = (await store.aget(ns, "k1")).value
        await store.aput(ns, "k1", {"text": "The user's cat is called Tofu.", "n": 2})
        found = await store.asearch((user,), query="what is the cat called")
        await store.adelete(ns, "k1")
        try:
            return first, found, await store.aget(ns, "k1"), await store.alist_namespaces(prefix=(user,))
        finally:
            await store.aclose()

    first, found, gone, namespaces = asyncio.run(scenario())
    assert first == {"text": "The user's cat is called Miso.", "n": 1}
    assert [(i.key, i.value) for i in found] == [("k1", {"text": "The user's cat is called Tofu.", "n": 2})]
    # Deleted, but its superseded first version stays in Engram's history: the namespace remains.
    assert gone is None and namespaces == [(user, "semantic")]


def test_each_operation_is_the_engram_operation_its_namespace_names(store, client, live_engram):
    user = _user()
    label = label_of(user)
    store.put((label, "semantic"), "pref", {"text": "The user prefers window seats."})
    store.put((label, "semantic"), "pref", {"text": "The user prefers aisle seats."})
    store.put((label, "episodic"), "e1", {"text": "I flew to Berlin last week."})
    store.put((label, "procedural"), "reset", {"trigger": "the router drops the connection",
                                                "steps": "unplug it\nwait ten seconds\nplug it back"})
    store.put((label,), "default-type", {"text": "The user's name is Ada."})  # the default type: a fact

    facts = client.list_memories(user, "semantic", include_superseded=True)
    by_text = {f["text"]: f for f in facts}
    old, new = by_text["The user prefers window seats."], by_text["The user prefers aisle seats."]
    assert old["superseded_by"] == [new["id"]] and new["supersedes"] == [old["id"]]  # a put supersedes
    assert "The user's name is Ada." in by_text
    [episode] = client.list_memories(user, "episodic")
    assert episode["client_id"] == episode_id("e1") and episode["metadata"]["key"] == "e1"
    [playbook] = client.list_memories(user, "procedural")
    assert playbook["trigger"] == "the router drops the connection"

    # Search is Engram's recall: its memory, type and score on each item, its explanation on request.
    explaining = EngramStore(client=client, explain=True)
    [hit, *_] = explaining.search((label,), query="which seat does the user prefer?", limit=3)
    assert isinstance(hit, EngramSearchItem) and hit.key == "pref"
    assert hit.memory["id"] == new["id"] and hit.memory["memory_type"] == "semantic"
    assert hit.score == hit.memory["score"] > 0 and "explain" in hit.memory
    assert all("explain" not in i.memory for i in store.search((label,), query="seat"))

    # A delete is a forget, with the store's reason code in the audit log.
    store.delete((label, "episodic"), "e1")
    assert client.list_memories(user, "episodic") == []
    actions = live_engram.manage("shell", "-c", (
        "from tenants.models import AuditEvent\n"
        f"print([e.details.get('reason') for e in AuditEvent.objects.filter(action='memory.forget', "
        f"target_id='{episode['id']}')])")).strip().splitlines()[-1]
    assert actions == "['user_request']"


def test_a_memory_written_another_way_is_an_item_keyed_by_its_engram_id(store, client):
    user = _user()
    written = client.write_fact(user, "The user's dog is a beagle.")
    item = store.get((label_of(user), "semantic"), written["id"])
    assert (item.key, item.value) == (written["id"], {"text": "The user's dog is a beagle."})
    assert store.get((label_of(user), "episodic"), written["id"]) is None  # another type: not there


def test_a_bad_namespace_or_value_is_refused_before_anything_is_written(store, client):
    user = _user()
    with pytest.raises(ValueError, match="not a memory type"):
        store.put((label_of(user), "catalog"), "x", {"text": "shared"})
    with pytest.raises(ValueError, match="trigger"):
        store.put((label_of(user), "procedural"), "x", {"text": "no steps"})
    with pytest.raises(ValueError, match="4096"):
        store.put((label_of(user), "semantic"), "x", {"text": "big", "blob": "x" * 5000})
    with pytest.raises(ValueError, match="end-user"):
        store.search(())
    assert client.list_subjects(prefix=user)["subjects"] == []


class State(TypedDict, total=False):
    user: str
    message: str
    remembered: list[str]


def _remember(state: State) -> State:
    store = get_store()
    store.put((state["user"], "semantic"), "latest", {"text": state["message"]})
    return {}


def _recall(state: State) -> State:
    items = get_store().search((state["user"],), query=state["message"], limit=3)
    return {"remembered": [i.value["text"] for i in items]}


async def _aremember(state: State) -> State:
    await get_store().aput((state["user"], "semantic"), "latest", {"text": state["message"]})
    return {}


async def _arecall(state: State) -> State:
    items = await get_store().asearch((state["user"],), query=state["message"], limit=3)
    return {"remembered": [i.value["text"] for i in items]}


def _graph(remember, recall, store):
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_compiled_graph_keeps_and_recalls_memory_through_the_store(store):
    user = label_of(_user())
    graph = _graph(_remember, _recall, store)
    graph.invoke({"user": user, "message": "My favourite tea is oolong."})
    out = graph.invoke({"user": user, "message": "I switched to green tea."})
    assert out["remembered"] == ["I switched to green tea."]  # the fact was superseded, not duplicated
    assert [i.value for i in store.search((user, "semantic"))] == [{"text": "I switched to green tea."}]

    agraph = _graph(_aremember, _arecall, store)
    out = asyncio.run(agraph.ainvoke({"user": user, "message": "Actually I drink rooibos now."}))
    assert out["remembered"] == ["Actually I drink rooibos now."]
