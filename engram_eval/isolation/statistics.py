"""Relevance statistics seen through an end-user's key. Document-level security does not scope them:
in shared indices a search's scores, explanations and significant-terms background counts cover
every tenant's documents. For shared tenants those figures are the documented residual (subject
keys never leave Engram, whose API shows no such figure), for dedicated tenants leaks; statistics
APIs Engram does not need must be refused for everyone."""

from __future__ import annotations

import uuid

from elasticsearch import Elasticsearch, helpers

from engram_core.es.schema import MemoryType, alias_name
from tenants.selectors import memory_scope

from .report import ProbeRecorder
from .world import SeededSubject, World
from tenants.services.clients import subject_es_client, writer_es_client


_COUNT_FIGURES = ("n, number of documents containing term", "N, total number of documents with field")


def _explanation_counts(node: dict) -> list[int]:
    """The document counts a Lucene BM25 explanation carries (n and N of every idf)."""
    found = [int(node["value"])] if str(node.get("description", "")).startswith(_COUNT_FIGURES) else []
    for child in node.get("details", []):
        found += _explanation_counts(child)
    return found


def statistics_probes(world: World, rec: ProbeRecorder) -> None:
    """Relevance statistics that could reveal another tenant's documents (see the module docstring).

    A figure bigger than what the prober's whole tenant holds in that index can only come from
    another tenant. Statistics APIs must be refused; figures inside plain searches are leaks for
    dedicated tenants and the documented residual for shared ones.
    """
    first_of_tenant: dict[str, SeededSubject] = {}
    for who in world.subjects:
        first_of_tenant.setdefault(who.tenant_id, who)
    for who in world.subjects:
        es = subject_es_client(subject=who.subject)
        alias = alias_name(MemoryType.EPISODIC, prefix=who.prefix)
        tenant_count = len(world.tenant_docs(who.tenant_id))
        foreign = sorted({d.marker for d in world.docs if d.tenant_id != who.tenant_id})
        residual = not who.dedicated
        with rec.probe("stats:termvectors(artificial doc)", who, refusal_ok=True) as p:
            response = es.termvectors(index=alias, doc={"text": " ".join(foreign)}, fields=["text"],
                                      term_statistics=True, field_statistics=True)
            text = response.get("term_vectors", {}).get("text", {})
            freqs = {t: v["doc_freq"] for t, v in text.get("terms", {}).items() if t in foreign and v.get("doc_freq")}
            if any(freqs.values()):
                p.leak(f"doc_freq of other tenants' words: {dict(sorted(freqs.items())[:3])}")
            if text.get("field_statistics", {}).get("doc_count", 0) > tenant_count:
                p.leak(f"field doc_count {text['field_statistics']['doc_count']} > {tenant_count} of this tenant")
        with rec.probe("stats:mtermvectors", who, refusal_ok=True) as p:
            response = es.mtermvectors(index=alias, docs=[{"doc": {"text": foreign[0]}, "fields": ["text"],
                                                           "term_statistics": True}])
            for item in response.get("docs", []):
                terms = item.get("term_vectors", {}).get("text", {}).get("terms", {})
                if terms.get(foreign[0], {}).get("doc_freq", 0):
                    p.leak(f"mtermvectors doc_freq of {foreign[0]}: {terms[foreign[0]]['doc_freq']}")
        own = world.visible(who, alias)[0]
        with rec.probe("stats:explain_api", who, refusal_ok=True) as p:
            response = es.explain(index=alias, id=own.id, query={"match": {"text": f"{own.marker} memory"}})
            counts = _explanation_counts(response.get("explanation", {}))
            if any(c > tenant_count for c in counts):
                p.leak(f"_explain shows document counts {sorted(set(counts))} > {tenant_count} of this tenant")
        with rec.probe("stats:field_caps", who, refusal_ok=True) as p:
            p.refused(lambda: es.field_caps(index=alias, fields="*"))
        with rec.probe("stats:terms_enum", who, refusal_ok=True) as p:
            p.refused(lambda: es.terms_enum(index=alias, field="tenant_id"))
        with rec.probe("stats:validate_query", who, refusal_ok=True) as p:
            p.refused(lambda: es.indices.validate_query(index=alias, explain=True, rewrite=True,
                                                        query={"match": {"text": foreign[0]}}))
        with rec.probe("stats:search_shards", who, refusal_ok=True) as p:
            p.refused(lambda: es.search_shards(index=alias))
        for kind, suggester in (("term", {"term": {"field": "text", "suggest_mode": "always"}}),
                                ("phrase", {"phrase": {"field": "text"}})):
            with rec.probe(f"stats:suggest_{kind}", who, refusal_ok=True) as p:
                p.refused(lambda s=suggester: es.search(index=alias, size=0, suggest={
                    "s": {"text": foreign[0][:-1] + "x", **s}}))
        with rec.probe("stats:profile", who, refusal_ok=True) as p:
            p.refused(lambda: es.search(index=alias, profile=True, query={"match": {"text": foreign[0]}}))
        # Figures inside plain searches: inherent to shared indices (residual), leaks when dedicated.
        with rec.probe("stats:search_explain", who) as p:
            response = es.search(index=alias, explain=True, size=100, query={"match": {"text": f"{who.marker} memory"}})
            counts = [c for h in response["hits"]["hits"] for c in _explanation_counts(h.get("_explanation", {}))]
            if any(c > tenant_count for c in counts):
                p.figure(f"search explain shows document counts up to {max(counts)} > {tenant_count} of this tenant",
                         residual=residual)
        with rec.probe("stats:significant_text_bg_count", who) as p:
            response = es.search(index=alias, size=0, query={"match": {"text": who.marker}}, aggs={
                "words": {"significant_text": {"field": "text", "min_doc_count": 1}},
                "types": {"significant_terms": {"field": "memory_type", "min_doc_count": 1}}})
            aggs = response["aggregations"]
            bg = [aggs[a].get("bg_count", 0) for a in ("words", "types")]
            bg += [b.get("bg_count", 0) for a in ("words", "types") for b in aggs[a]["buckets"]]
            if max(bg, default=0) > tenant_count:
                p.figure(f"bg_count {max(bg)} > {tenant_count} documents of this tenant", residual=residual)
        if first_of_tenant[who.tenant_id] is who:
            _probe_score_drift(world, rec, who, es, alias)


def _probe_score_drift(world: World, rec: ProbeRecorder, who: SeededSubject, es: Elasticsearch, alias: str) -> None:
    """Another tenant writes documents holding the prober's own words: the prober's scores, and
    every figure of Engram's recall with ``explain``, must not move."""
    others = [s for s in world.subjects if s.tenant_id != who.tenant_id]
    # Worst case for a shared tenant: a writer in the same (shared) indices.
    writer_side = next((s for s in others if not s.dedicated), others[0])
    query = {"match": {"text": f"{who.marker} memory"}}

    def scores() -> list[tuple[str, float]]:
        return [(h["_id"], h["_score"]) for h in es.search(index=alias, size=100, query=query)["hits"]["hits"]]

    with rec.probe("stats:score_drift", who) as p:
        before = scores()
        planted = [uuid.uuid4().hex for _ in range(20)]
        target = alias_name(MemoryType.EPISODIC, prefix=writer_side.prefix)
        writer = writer_es_client(prefix=writer_side.prefix)
        helpers.bulk(writer, ({"_op_type": "index", "_index": target, "_id": i, "_source": {
            **memory_scope(subject=writer_side.subject), "memory_type": "episodic", "source": "isolation-probe",
            "text": f"{who.marker} {who.marker} memory planted by another tenant"}} for i in planted),
            refresh=True)
        try:
            after = scores()
        finally:
            helpers.bulk(writer, ({"_op_type": "delete", "_index": target, "_id": i} for i in planted),
                         refresh=True, raise_on_error=False)
        if before != after:
            moved = sum(1 for b, a in zip(before, after, strict=False) if b != a)
            p.figure(f"{moved} _score(s) of own documents moved when another tenant wrote (e.g. "
                     f"{before[0][1]:.4f} -> {after[0][1]:.4f})", residual=not who.dedicated)
