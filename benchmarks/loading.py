"""The corpus (benchmarks/corpus.py) put into Engram through its write path, grown in place
from one size to the next."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks import engram
from benchmarks.corpus import HEAVY, START, Synth, plan

HEAVY_IMPORT_CHUNK = 5000
LARGE_IMPORT = 1000  # an import call this large is also timed on its own (per-call costs amortised)


def import_call(tenant: engram.Tenant, external_id: str, episodes: list[dict]) -> tuple[int, float]:
    """One bulk import through the write path of ``POST .../episodes:import``; (episodes, seconds)."""
    started = time.perf_counter()
    submitted = engram.write_submit(tenant=tenant, external_id=external_id, operation="import",
                                    payload={"episodes": episodes}, actor="bench")
    if submitted.queued:  # a queued write's rate would be the outbox's, not the import's
        raise RuntimeError("the import was queued (Elasticsearch unavailable?)")
    return len(submitted.result["ids"]), time.perf_counter() - started


class Corpus:
    """The plan's tenants and end-users in Engram, and what has been loaded so far. Episodes
    arrive by bulk import, a call per end-user and step (the heavy end-user's in calls of
    ``HEAVY_IMPORT_CHUNK``) from ``threads`` threads; facts, playbooks and catalog entries one
    write each, from 16 times as many (each waits for a refresh)."""

    def __init__(self, *, synth: Synth, tenants: int, users_per_tenant: int, threads: int = 2):
        self.synth, self.n_tenants, self.users_per_tenant, self.threads = synth, tenants, users_per_tenant, threads
        self.tenants: list[engram.Tenant] = []
        self.subjects: dict[str, engram.Subject] = {}
        self.loaded = plan(0, tenants=tenants, users_per_tenant=users_per_tenant)
        self.facts: dict[str, list[str]] = {}  # external id -> its current (not superseded) facts

    def create(self) -> float:
        """Every tenant and end-user (each end-user's key minted); the seconds it took."""
        started = time.perf_counter()
        for t in range(self.n_tenants):
            self.tenants.append(engram.tenant_create(slug=f"bench-{t:03d}", name=f"Bench tenant {t}"))
        for t, external_id in self.loaded.users:
            self.subjects[external_id] = engram.subject_get_or_create(tenant=self.tenants[t], external_id=external_id,
                                                                      actor="bench")
        return time.perf_counter() - started

    @property
    def heavy(self) -> engram.Subject:
        return self.subjects[HEAVY]

    @property
    def ordinary(self) -> list[engram.Subject]:
        return [s for external_id, s in self.subjects.items() if external_id != HEAVY]

    def grow(self, size: int) -> dict:
        """Load the difference up to ``size`` memories; how fast the imports went."""
        target = plan(size, tenants=self.n_tenants, users_per_tenant=self.users_per_tenant)
        imports, singles = [], []
        for key, want in target.users.items():
            have = self.loaded.users[key]
            tenant, external_id = self.tenants[key[0]], key[1]
            chunk = HEAVY_IMPORT_CHUNK if external_id == HEAVY else want.episodes
            for start in range(have.episodes, want.episodes, max(chunk, 1)):
                imports.append((tenant, external_id, start, min(want.episodes, start + chunk)))
            singles += [("fact", tenant, external_id, n) for n in range(have.facts, want.facts)]
            singles += [("playbook", tenant, external_id, n) for n in range(have.playbooks, want.playbooks)]
        for t, (have, want) in enumerate(zip(self.loaded.catalog, target.catalog, strict=True)):
            singles += [("catalog", self.tenants[t], None, n) for n in range(have, want)]

        def one_import(*, job: tuple) -> tuple[int, float]:
            tenant, external_id, start, stop = job
            return import_call(tenant, external_id,
                               [self.synth.episode(external_id, n, start=START) for n in range(start, stop)])

        # Each job on its pool thread as Django runs a request: its database connection is not left open.
        started = time.perf_counter()
        with ThreadPoolExecutor(self.threads) as pool:
            calls = list(pool.map(lambda job: engram.as_request(one_import, job=job), imports))
        import_s = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(16 * self.threads) as pool:
            list(pool.map(lambda job: engram.as_request(self._single, job=job), singles))
        singles_s = time.perf_counter() - started
        self.loaded = target
        imported = sum(n for n, _ in calls)
        large = [(n, s) for n, s in calls if n >= LARGE_IMPORT]
        return {"episodes_imported": imported, "import_s": round(import_s, 2), "singles": len(singles),
                "singles_s": round(singles_s, 2), "import_eps": round(imported / import_s, 1) if import_s else None,
                "import_eps_large": round(sum(n for n, _ in large) / sum(s for _, s in large), 1) if large else None}

    def _single(self, *, job: tuple[str, engram.Tenant, str | None, int]) -> None:
        kind, tenant, external_id, n = job
        if kind == "catalog":
            title, text = self.synth.catalog(tenant.slug, n)
            engram.catalog_entry_write(tenant=tenant, title=title, text=text)
        elif kind == "fact":
            submitted = engram.write_submit(tenant=tenant, external_id=external_id, operation="fact",
                                            payload={"text": self.synth.fact(external_id, n)}, actor="bench")
            self.facts.setdefault(external_id, []).append(submitted.memory_id)
        else:
            trigger, steps = self.synth.playbook(external_id, n)
            engram.write_submit(tenant=tenant, external_id=external_id, operation="playbook",
                                payload={"trigger": trigger, "steps": steps}, actor="bench")

    def targets(self) -> list[tuple[str, str]]:
        """(agent token, external id) of every ordinary end-user, a token per tenant: what HTTP
        clients spread their load over."""
        tokens = {tenant.pk: engram.token_create(tenant) for tenant in self.tenants}
        return [(tokens[s.tenant_id], s.external_id) for s in self.ordinary]
