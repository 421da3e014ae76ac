"""What an isolation probe run found: leaks, failed probes, the shared mode's residual statistics,
and the probe counts per family."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field

from elasticsearch import ApiError, AuthenticationException, AuthorizationException, TransportError

from .world import SeededSubject, World


@dataclass(frozen=True)
class Finding:
    probe: str
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.probe}] as {self.subject}: {self.detail}"


@dataclass
class ProbeReport:
    leaks: list[Finding] = field(default_factory=list)
    failures: list[Finding] = field(default_factory=list)
    # Shared-mode relevance statistics seen through a subject key: documented, not a leak.
    residual: list[Finding] = field(default_factory=list)
    by_family: Counter[str] = field(default_factory=Counter)  # "search", "get", "service", ...

    @property
    def probes(self) -> int:
        return sum(self.by_family.values())

    @property
    def ok(self) -> bool:
        return self.probes > 0 and not self.leaks and not self.failures

    def summary(self) -> str:
        line = f"probes: {self.probes}, leaks: {len(self.leaks)}, failures: {len(self.failures)}"
        if self.residual:
            line += f" (shared-mode statistics residual: {len(self.residual)}, see docs/isolation.md)"
        return line

    def breakdown(self) -> str:
        return ", ".join(f"{family} {n}" for family, n in sorted(self.by_family.items()))


class ProbeScope:
    """One probe's verdicts: call ``leak``/``fail``, or the helpers that do it for you."""

    def __init__(self, recorder: ProbeRecorder, name: str, who: str):
        self._recorder, self.name, self.who = recorder, name, who

    def leak(self, detail: str) -> None:
        self._recorder.report.leaks.append(Finding(self.name, self.who, detail))

    def fail(self, detail: str) -> None:
        self._recorder.report.failures.append(Finding(self.name, self.who, detail))

    def figure(self, detail: str, *, residual: bool) -> None:
        """A statistic revealing another tenant's data: a leak, or the shared mode's residual."""
        (self._recorder.report.residual if residual else self._recorder.report.leaks).append(
            Finding(self.name, self.who, detail))

    def ids(self, returned: Sequence[str], *, allowed: AbstractSet[str],
            required: AbstractSet[str] = frozenset()) -> None:
        """Returned ids must lie within ``allowed`` (else a leak) and cover ``required`` (else a failure)."""
        extra = set(returned) - allowed
        if extra:
            self.leak(f"{len(extra)} foreign document(s) returned: {sorted(extra)[:5]}")
        missing = set(required) - set(returned)
        if missing:
            self.fail(f"{len(missing)} of the subject's own document(s) not returned: {sorted(missing)[:5]}")

    def refused(self, call: Callable[[], object]) -> None:
        """``call`` must be refused by Elasticsearch's security layer; being served is a leak."""
        try:
            call()
        except (AuthenticationException, AuthorizationException):
            return
        except ApiError as exc:
            if exc.error == "security_exception":  # e.g. suggesters under DLS answer 400 security_exception
                return
            raise
        self.leak("request was allowed")


class ProbeRecorder:
    def __init__(self) -> None:
        self.report = ProbeReport()

    @contextmanager
    def probe(self, name: str, who: SeededSubject | str, *, refusal_ok: bool = False) -> Iterator[ProbeScope]:
        """Count one probe. An Elasticsearch error inside it is recorded as a failure (the run
        fails), except, with ``refusal_ok``, the security layer refusing the request: for a
        probe aimed at someone else's data or at a statistics API, a refusal reveals nothing."""
        label = who.label if isinstance(who, SeededSubject) else who
        self.report.by_family[re.split(r"[:.(]", name, maxsplit=1)[0]] += 1
        scope = ProbeScope(self, name, label)
        try:
            yield scope
        except (AuthenticationException, AuthorizationException) as exc:
            if not refusal_ok:
                scope.fail(f"{type(exc).__name__}: {exc}")
        except (ApiError, TransportError) as exc:
            if not (refusal_ok and isinstance(exc, ApiError) and exc.error == "security_exception"):
                scope.fail(f"{type(exc).__name__}: {exc}")


# More probes (e.g. through the memory services) plug into a run as callables of (world, recorder).
ExtraProbe = Callable[[World, ProbeRecorder], None]
