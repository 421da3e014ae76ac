"""EngramRetriever against a live Engram server: Documents carrying Engram's ids, types and
scores, sync and async, inside a LangChain chain and a compiled LangGraph graph."""

from __future__ import annotations

import asyncio
import uuid
from typing import TypedDict

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from engram_client import EngramClient
from engram_client.langchain import EngramRetriever


@pytest.fixture
def remembered(live_engram, live_token):
    user = f"lc-{uuid.uuid4().hex[:8]}"
    with EngramClient(live_engram.url, live_token) as engram:
        fact = engram.write_fact(user, "The user's laptop is a ThinkPad X1.")
        playbook = engram.write_playbook(user, "the laptop will not charge", ["try another socket", "reseat the cable"])
        engram.turn(user, "My laptop battery died during the meeting.")
    return user, fact["id"], playbook["id"]


def test_documents_carry_engrams_ids_types_and_scores(live_engram, live_token, remembered):
    user, fact_id, playbook_id = remembered
    retriever = EngramRetriever(base_url=live_engram.url, token=live_token, external_id=user, k=5)
    docs = retriever.invoke("what laptop does the user have?")
    assert all(isinstance(d, Document) for d in docs)
    by_id = {d.metadata["id"]: d for d in docs}
    assert docs[0].id == docs[0].metadata["id"] == fact_id
    assert by_id[fact_id].page_content == "The user's laptop is a ThinkPad X1."
    assert by_id[fact_id].metadata["memory_type"] == "semantic"
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert {d.metadata["memory_type"] for d in docs} >= {"semantic", "episodic"}
    playbooks = EngramRetriever(base_url=live_engram.url, token=live_token, external_id=user, types=["procedural"],
                                explain=True).invoke("laptop not charging")
    assert [d.metadata["id"] for d in playbooks] == [playbook_id]
    assert playbooks[0].page_content == "the laptop will not charge\ntry another socket\nreseat the cable"
    assert "explain" in playbooks[0].metadata and "text" not in playbooks[0].metadata


def test_async_and_sync_give_the_same_documents(live_engram, live_token, remembered):
    user, _, _ = remembered
    retriever = EngramRetriever(base_url=live_engram.url, token=live_token, external_id=user, k=3)
    sync = retriever.invoke("battery")
    assert [d.metadata["id"] for d in asyncio.run(retriever.ainvoke("battery"))] == [d.metadata["id"] for d in sync]


def test_the_retriever_in_a_chain_and_in_a_compiled_graph(live_engram, live_token, remembered):
    user, fact_id, _ = remembered
    retriever = EngramRetriever(base_url=live_engram.url, token=live_token, external_id=user, k=2,
                                types=["semantic"])
    chain = retriever | RunnableLambda(lambda docs: "; ".join(d.page_content for d in docs))
    assert chain.invoke("laptop") == "The user's laptop is a ThinkPad X1."

    class State(TypedDict, total=False):
        question: str
        context: list[str]

    async def retrieve(state: State) -> State:
        return {"context": [d.metadata["id"] for d in await retriever.ainvoke(state["question"])]}

    builder = StateGraph(State)
    builder.add_node("retrieve", retrieve)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", END)
    graph = builder.compile()
    assert asyncio.run(graph.ainvoke({"question": "which laptop?"}))["context"] == [fact_id]



def test_an_unknown_end_user_raises_the_clients_error(live_engram, live_token):
    from engram_client import EngramAPIError
    with pytest.raises(ValueError, match="base_url"):
        EngramRetriever(external_id="x")
    retriever = EngramRetriever(base_url=live_engram.url, token=live_token, external_id=f"nobody-{uuid.uuid4().hex}")
    with pytest.raises(EngramAPIError) as caught:
        retriever.invoke("anything")
    assert (caught.value.status, caught.value.code) == (404, "not_found")
