"""The shared Elasticsearch client: connections per node (real Elasticsearch)."""

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from engram_core.es.client import admin_client, base_client


def test_a_process_keeps_more_requests_in_flight_than_the_client_default(settings, es_prefix):
    # The Python client's default (10 per node, callers beyond it wait) capped a process at
    # about 40 refresh-waiting writes a second whatever its threads.
    settings.ES_CONNECTIONS_PER_NODE = 24
    base_client.cache_clear()  # a new pool; the old one stays open for the fixtures holding it
    try:
        es = admin_client().options(ignore_status=408, request_timeout=30)
        threads = 20
        start = threading.Barrier(threads)

        def held() -> bool:
            start.wait()
            # The node holds each of these for a second before it answers 408 (timed out).
            return es.cluster.health(wait_for_nodes="99", timeout="1s")["timed_out"]

        with ThreadPoolExecutor(threads) as pool:
            assert all(pool.map(lambda _: held(), range(threads)))
        node = base_client().transport.node_pool.get()
        assert node.pool.pool.maxsize == 24
        assert node.pool.num_connections == threads  # all at once, none waited for a connection
    finally:
        base_client().close()
        base_client.cache_clear()


def test_bodies_are_written_by_orjson_and_read_back_the_same(es_prefix):
    """Request bodies with vectors are written by orjson (the standard library's json took ~0.35 ms
    per 384-float vector): documents, bulk and msearch lines, and the compatibility mimetypes the
    client actually sends. A document with a vector, a numpy array, a date and non-ASCII text goes
    through _bulk and comes back through _msearch as it was sent."""
    import datetime

    import numpy as np
    import orjson
    from elasticsearch import helpers

    from engram_core.es.client import OrjsonNdjsonSerializer

    serializers = base_client().transport.serializers
    for mimetype in ("application/json", "application/vnd.elasticsearch+json"):
        assert serializers.get_serializer(mimetype).json_dumps({"v": [0.5]}) == orjson.dumps({"v": [0.5]})
    for mimetype in ("application/x-ndjson", "application/vnd.elasticsearch+x-ndjson"):
        assert isinstance(serializers.get_serializer(mimetype), OrjsonNdjsonSerializer)
    es, index = admin_client(), f"{es_prefix}-serializer"
    es.indices.create(index=index, mappings={"dynamic": False,  # n: kept in _source only, as metadata is
                                             "properties": {"v": {"type": "dense_vector", "dims": 3},
                                                            "at": {"type": "date"}, "text": {"type": "text"}}})
    try:
        when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)
        helpers.bulk(es, [{"_index": index, "_id": "a", "text": "Zoë’s café", "at": when,
                           "v": np.array([0.25, -0.5, 1.0], dtype=np.float32), "n": np.int64(3)}], refresh=True)
        found = es.msearch(searches=[{"index": index}, {"query": {"knn": {"field": "v", "query_vector": [0.25, -0.5, 1.0]}},
                                                        "fields": ["v"]}])["responses"][0]["hits"]["hits"]
        assert [h["_id"] for h in found] == ["a"]
        source = es.get(index=index, id="a")["_source"]
        assert source["text"] == "Zoë’s café" and source["at"] == "2024-05-01T12:30:00+00:00" and source["n"] == 3
        assert found[0]["fields"]["v"] == [0.25, -0.5, 1.0]
        # A body orjson refuses (a whole number beyond 64 bits) is written by the standard
        # library's json as before orjson, and meets Elasticsearch's own answer.
        for mimetype in ("application/json", "application/x-ndjson"):
            assert serializers.get_serializer(mimetype).dumps([{"n": 2 ** 70}] if "nd" in mimetype else {"n": 2 ** 70}) \
                .startswith(b'{"n":1180591620717411303424}')
        es.index(index=index, id="big", document={"n": 2 ** 70, "text": "big"}, refresh=True)
        assert es.get(index=index, id="big")["_source"]["text"] == "big"
    finally:
        es.indices.delete(index=index)


def test_es_url_may_name_several_nodes_and_the_client_goes_round_one_that_is_gone(settings, es_prefix):
    """A cluster's nodes in ES_URL, comma-separated: requests spread over them, and a request whose
    node does not answer is sent to the next one (here a port nothing listens on)."""
    from engram_core.es.client import es_hosts

    assert es_hosts("https://a:9200, https://b:9200,") == ["https://a:9200", "https://b:9200"]
    url = settings.ES_URL
    settings.ES_URL = f"http://127.0.0.1:9,{url}"
    base_client.cache_clear()
    try:
        assert len(base_client().transport.node_pool.all()) == 2
        for _ in range(4):
            assert admin_client().cluster.health()["status"] in ("green", "yellow")
    finally:
        base_client().close()
        base_client.cache_clear()
        settings.ES_URL = url


def test_the_node_pool_serves_requests_while_other_threads_mark_nodes_dead_and_alive(settings):
    """With several nodes, a request picks a node while others mark nodes dead (a node lost) or
    alive again; elastic-transport's pool read its live nodes unguarded, and a recall got a 500
    (RuntimeError: dictionary changed size during iteration) with a node lost under load."""
    settings.ES_URL = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3,http://127.0.0.1:4"
    base_client.cache_clear()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave as a busy process's do
    try:
        pool = base_client().transport.node_pool
        nodes = pool.all()
        stop, errors = threading.Event(), []

        def flap(node) -> None:
            while not stop.is_set():
                pool.mark_dead(node, _now=0.0)  # its timeout long over: the next get resurrects it
                pool.mark_live(node)

        def pick() -> None:
            try:
                for _ in range(20_000):
                    pool.get()
            except RuntimeError as exc:
                errors.append(exc)
            finally:
                stop.set()

        flappers = [threading.Thread(target=flap, args=(node,)) for node in nodes]
        pickers = [threading.Thread(target=pick) for _ in range(2)]
        for thread in flappers + pickers:
            thread.start()
        for thread in pickers + flappers:
            thread.join()
        assert errors == []
    finally:
        sys.setswitchinterval(switch)
        base_client().close()
        base_client.cache_clear()
