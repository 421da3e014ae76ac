"""The shared Elasticsearch client: connections per node (real Elasticsearch)."""

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
