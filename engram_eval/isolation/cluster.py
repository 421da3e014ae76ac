"""Probes made with an end-user's own DLS key directly against Elasticsearch, the way a bug or an
injected query in Engram would reach it: searches, gets, aggregations, scrolls, kNN, writes and
the key lifecycle, aimed at other end-users and other tenants."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from elasticsearch import ApiError, AuthorizationException, Elasticsearch, NotFoundError

from engram_core.es.schema import MemoryType, alias_name, all_aliases
from tenants.selectors import memory_scope

from .report import ProbeRecorder, ProbeScope
from .world import ACTOR, SeededSubject, World
from tenants.services.clients import subject_es_client
from tenants.services.keys import KeyLifetimes, subject_key_revoke, subject_key_rotate


def _hit_ids(response) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


def subject_probes(world: World, rec: ProbeRecorder, who: SeededSubject) -> None:
    """Everything ``who``'s own key can try: each alias, index patterns, concrete indices, cluster
    APIs, then every other end-user's and tenant's documents."""
    es = subject_es_client(subject=who.subject)
    visible_all = {d.id for d in world.visible(who)}
    own_aliases = all_aliases(prefix=who.prefix)
    for alias in own_aliases:
        _probe_alias(world, rec, who, es, alias)
    with rec.probe("msearch:match_all", who) as p:
        searches = []
        for alias in own_aliases:
            searches += [{"index": alias}, {"query": {"match_all": {}}, "size": 1000}]
        for response in es.msearch(searches=searches)["responses"]:
            if "error" in response:
                p.fail(f"msearch item failed: {response['error']}")
            else:
                p.ids(_hit_ids(response), allowed=visible_all)
    with rec.probe("query_string:own_marker", who) as p:
        response = es.search(index=",".join(own_aliases), size=1000,
                             query={"query_string": {"query": f"text:{who.marker}"}})
        own = {d.id for d in world.docs_of(who)}
        p.ids(_hit_ids(response), allowed=visible_all, required=own)
    for pattern in ("*", "_all", f"{world.prefix}-*", f"{who.prefix}-*"):
        with rec.probe(f"search:index={pattern}", who) as p:
            p.ids(_hit_ids(es.search(index=pattern, size=1000, query={"match_all": {}})), allowed=visible_all)
    for index in world.concrete_indices:
        with rec.probe("search:concrete_index", who) as p:
            p.refused(lambda: es.search(index=index, query={"match_all": {}}))
    with rec.probe("cluster:health", who) as p:
        p.refused(lambda: es.cluster.health())
    with rec.probe("indices:refresh", who) as p:
        p.refused(lambda: es.indices.refresh(index=own_aliases[0]))
    with rec.probe("indices:get_mapping", who) as p:
        p.refused(lambda: es.indices.get_mapping(index=own_aliases[0]))
    for other in world.subjects:
        if other is not who:
            _probe_other_subject(world, rec, who, es, other)
    for tenant in world.tenants:
        if tenant.slug != who.tenant_id:
            _probe_other_tenant(world, rec, who, es, tenant.slug)


def _probe_alias(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch, alias: str) -> None:
    kind = alias.rsplit("-", 1)[1]
    visible = {d.id for d in world.visible(who, alias)}
    foreign = world.foreign(who, alias)
    foreign_markers = {d.marker for d in world.foreign(who)} - {d.marker for d in world.visible(who)}

    with rec.probe(f"search:match_all:{kind}", who) as p:
        p.ids(_hit_ids(es.search(index=alias, size=1000, query={"match_all": {}})), allowed=visible, required=visible)
    with rec.probe(f"count:{kind}", who) as p:
        count = es.count(index=alias)["count"]
        if count > len(visible):
            p.leak(f"count {count} exceeds the {len(visible)} visible documents")
        elif count < len(visible):
            p.fail(f"count {count} below the {len(visible)} visible documents")
    with rec.probe(f"ids:{kind}", who) as p:
        ids = [d.id for d in foreign]
        p.ids(_hit_ids(es.search(index=alias, size=1000, query={"ids": {"values": ids}})), allowed=set())
    with rec.probe(f"aggs:terms:{kind}", who) as p:
        terms = {"size": 1000, "min_doc_count": 0}
        aggs = es.search(index=alias, size=0, aggs={
            "users": {"terms": {"field": "user_id", **terms}},
            "tenants": {"terms": {"field": "tenant_id", **terms}},
            "sessions": {"terms": {"field": "session_id", **terms}},
            "everything": {"global": {}, "aggs": {"users": {"terms": {"field": "user_id", **terms}},
                                                  "tenants": {"terms": {"field": "tenant_id", **terms}}}},
            "distinct_users": {"cardinality": {"field": "user_id"}},
        })["aggregations"]
        users = {b["key"] for b in aggs["users"]["buckets"] + aggs["everything"]["users"]["buckets"]}
        tenants = {b["key"] for b in aggs["tenants"]["buckets"] + aggs["everything"]["tenants"]["buckets"]}
        sessions = {b["key"] for b in aggs["sessions"]["buckets"]}
        if users - {who.user_id}:
            p.leak(f"user_id buckets of others: {sorted(users - {who.user_id})[:5]}")
        if tenants - {who.tenant_id}:
            p.leak(f"tenant_id buckets of other tenants: {sorted(tenants - {who.tenant_id})}")
        # A zero-count bucket (min_doc_count 0) comes from the index's terms that the key's
        # document-level security lets through: the prober's own memories of every type, since
        # the alias's type filter narrows the search, not the terms enumerated.
        allowed_sessions = {f"s-{d.marker}" for d in world.visible(who)}
        if sessions - allowed_sessions:
            p.leak(f"session_id buckets of others: {sorted(sessions - allowed_sessions)[:5]}")
        if aggs["everything"]["doc_count"] > len(visible):
            p.leak(f"global aggregation counted {aggs['everything']['doc_count']} > {len(visible)} documents")
        if aggs["distinct_users"]["value"] > 1:
            p.leak(f"cardinality of user_id is {aggs['distinct_users']['value']}")
    with rec.probe(f"aggs:significant_text:{kind}", who) as p:
        buckets = es.search(index=alias, size=0, query={"match_all": {}}, aggs={
            "words": {"significant_text": {"field": "text", "min_doc_count": 1, "size": 1000}}})
        words = {b["key"] for b in buckets["aggregations"]["words"]["buckets"]}
        if words & foreign_markers:
            p.leak(f"significant_text surfaced others' words: {sorted(words & foreign_markers)}")
    with rec.probe(f"scroll:{kind}", who) as p:
        seen: list[str] = []
        response = es.search(index=alias, size=2, scroll="1m", query={"match_all": {}})
        scroll_id = response["_scroll_id"]
        try:
            while response["hits"]["hits"]:
                seen += _hit_ids(response)
                response = es.scroll(scroll_id=scroll_id, scroll="1m")
                scroll_id = response["_scroll_id"]
        finally:
            es.clear_scroll(scroll_id=scroll_id)
        p.ids(seen, allowed=visible, required=visible)
    with rec.probe(f"point_in_time:{kind}", who, refusal_ok=True) as p:
        pit = es.open_point_in_time(index=alias, keep_alive="1m")["id"]
        try:
            try:
                response = es.search(pit={"id": pit, "keep_alive": "1m"}, size=1000, query={"match_all": {}})
            except AuthorizationException:
                # Searching a PIT is authorised against the concrete index, which subject keys
                # are not granted (they name the aliases only): refused, nothing returned.
                response = None
            if response is not None:
                p.ids(_hit_ids(response), allowed=visible)
        finally:
            es.close_point_in_time(id=pit)
    with rec.probe(f"include_superseded:{kind}", who) as p:
        response = es.search(index=alias, size=1000, query={"exists": {"field": "superseded_by"}})
        own_superseded = {d.id for d in world.visible(who, alias) if d.superseded}
        p.ids(_hit_ids(response), allowed=own_superseded, required=own_superseded)
    if foreign:
        with rec.probe(f"knn:{kind}", who) as p:
            response = es.search(index=alias, size=100, knn={
                "field": "embedding", "query_vector": list(foreign[0].vector), "k": 100, "num_candidates": 200})
            p.ids(_hit_ids(response), allowed=visible, required=visible)
    if foreign and kind == MemoryType.EPISODIC.value:  # episodes' sentence vectors: nested documents
        with rec.probe(f"knn:passages:{kind}", who) as p:
            response = es.search(index=alias, size=100, knn={
                "field": "passages.embedding", "query_vector": list(foreign[0].vector), "k": 100,
                "num_candidates": 200})
            p.ids(_hit_ids(response), allowed=visible, required=visible)
        with rec.probe(f"nested:inner_hits:{kind}", who) as p:
            response = es.search(index=alias, size=1000, query={
                "nested": {"path": "passages", "query": {"match_all": {}}, "inner_hits": {}}})
            p.ids(_hit_ids(response), allowed=visible, required=visible)
    with rec.probe(f"suggest:term:{kind}", who, refusal_ok=True) as p:
        target = sorted(foreign_markers)[0]

        def suggest():
            response = es.search(index=alias, size=0, suggest={
                "s": {"text": target[:-1] + "x", "term": {"field": "text", "suggest_mode": "always"}}})
            offered = {o["text"] for entry in response.get("suggest", {}).get("s", []) for o in entry["options"]}
            if offered & foreign_markers:
                p.leak(f"term suggester offered others' words: {sorted(offered & foreign_markers)}")

        try:
            suggest()
        except ApiError as exc:
            if exc.error != "security_exception":  # suggesters are refused under DLS: not a leak
                raise
    with rec.probe(f"terms_enum:{kind}", who, refusal_ok=True) as p:
        own_markers = {d.marker for d in world.visible(who)}
        for field_name, string, allowed in (("user_id", None, {who.user_id}), ("tenant_id", None, {who.tenant_id}),
                                            ("text", "zq", own_markers)):
            terms = set(es.terms_enum(index=alias, field=field_name, string=string, size=1000)["terms"])
            if terms - allowed:
                p.leak(f"terms_enum on {field_name} returned {sorted(terms - allowed)[:5]}")
    with rec.probe(f"write:tampered_scope:{kind}", who) as p:
        other = next(s for s in world.subjects if s.tenant_id != who.tenant_id)
        p.refused(lambda: es.index(index=alias, document={**memory_scope(subject=other.subject), "text": "x"}))


def _probe_other_subject(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch,
                         other: SeededSubject) -> None:
    theirs = world.docs_of(other)
    # The other subject's indices when they are not the prober's own: a refusal reveals nothing.
    elsewhere = other.prefix != who.prefix
    every_alias = ",".join(dict.fromkeys(all_aliases(prefix=who.prefix) + all_aliases(prefix=other.prefix)))
    with rec.probe("query_string:other_user", who, refusal_ok=elsewhere) as p:
        query = f'user_id:"{other.user_id}" OR text:{other.marker} OR session_id:"s-{other.marker}"'
        response = es.search(index=every_alias, size=1000, query={"query_string": {"query": query}})
        p.ids(_hit_ids(response), allowed=set())
    with rec.probe("ids:other_user", who, refusal_ok=elsewhere) as p:
        response = es.search(index=every_alias, size=1000, query={"ids": {"values": [d.id for d in theirs]}})
        p.ids(_hit_ids(response), allowed=set())
    with rec.probe("mget:other_user", who, refusal_ok=elsewhere) as p:
        found = [d["_id"] for d in es.mget(docs=[{"_index": d.alias, "_id": d.id} for d in theirs])["docs"]
                 if d.get("found")]
        p.ids(found, allowed=set())
    for doc in theirs:
        with rec.probe(f"get:{doc.memory_type.value}", who, refusal_ok=elsewhere) as p:
            _expect_absent(p, lambda: es.get(index=doc.alias, id=doc.id))
    doc = theirs[0]
    with rec.probe("get_source", who, refusal_ok=elsewhere) as p:
        _expect_absent(p, lambda: es.get_source(index=doc.alias, id=doc.id))
    with rec.probe("exists", who, refusal_ok=elsewhere) as p:
        if es.exists(index=doc.alias, id=doc.id):
            p.leak(f"exists() confirmed {doc.id}")
    with rec.probe("explain", who, refusal_ok=True) as p:
        try:
            if es.explain(index=doc.alias, id=doc.id, query={"match_all": {}}).get("matched"):
                p.leak(f"explain matched {doc.id}")
        except NotFoundError:
            pass
    with rec.probe("termvectors", who, refusal_ok=True) as p:
        response = es.termvectors(index=doc.alias, id=doc.id, fields=["text"])
        if response.get("found") or response.get("term_vectors"):
            p.leak(f"termvectors of {doc.id}")
    with rec.probe("update:other_user", who) as p:
        p.refused(lambda: es.update(index=doc.alias, id=doc.id, doc={"superseded_by": "tampered"}))
    with rec.probe("delete:other_user", who) as p:
        p.refused(lambda: es.delete(index=doc.alias, id=doc.id))


def _probe_other_tenant(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch,
                        tenant_id: str) -> None:
    with rec.probe("query_string:other_tenant", who) as p:
        response = es.search(index=",".join(all_aliases(prefix=who.prefix)), size=1000,
                             query={"query_string": {"query": f'tenant_id:"{tenant_id}"'}})
        p.ids(_hit_ids(response), allowed=set())
    with rec.probe("catalog:other_tenant", who) as p:
        response = es.search(index=alias_name(MemoryType.CATALOG, prefix=who.prefix), size=1000,
                             query={"bool": {"should": [{"term": {"tenant_id": tenant_id}},
                                                        {"match": {"text": world.catalog_of(tenant_id)[0].marker}}]}})
        p.ids(_hit_ids(response), allowed=set())
    for doc in world.catalog_of(tenant_id):
        with rec.probe("get:catalog:other_tenant", who, refusal_ok=True) as p:
            _expect_absent(p, lambda: es.get(index=doc.alias, id=doc.id))


def _expect_absent(p: ProbeScope, call: Callable[[], object]) -> None:
    try:
        response = call()
    except NotFoundError:
        return
    if not isinstance(response.body, dict) or response.body.get("found", True):
        p.leak(f"document returned: {str(response.body)[:120]}")


def lifecycle_probes(world: World, rec: ProbeRecorder) -> None:
    """Rotated-out (grace over) and revoked keys are refused; the replacements work."""
    by_tenant: dict[str, list[SeededSubject]] = {}
    for who in world.subjects:
        by_tenant.setdefault(who.tenant_id, []).append(who)
    for members in by_tenant.values():
        for who, change in zip(members, ("rotate", "revoke")):
            old = subject_es_client(subject=who.subject)
            if change == "rotate":
                subject_key_rotate(subject=who.subject, actor=ACTOR, grace=timedelta(0),
                                   lifetimes=KeyLifetimes.from_settings())
            else:
                subject_key_revoke(subject=who.subject, actor=ACTOR)
            alias = alias_name(MemoryType.SEMANTIC, prefix=who.prefix)
            with rec.probe(f"lifecycle:{change}d_key_refused", who) as p:
                p.refused(lambda: old.search(index=alias, query={"match_all": {}}))
            with rec.probe(f"lifecycle:{change}:new_key_works", who) as p:
                visible = {d.id for d in world.visible(who, alias)}
                fresh = subject_es_client(subject=who.subject)
                p.ids(_hit_ids(fresh.search(index=alias, size=1000, query={"match_all": {}})),
                      allowed=visible, required=visible)
