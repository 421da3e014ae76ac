"""The run's budget and record of bad inputs (a pytest plugin, loaded by tests/conftest.py).

- Hypothesis runs under the ``engram`` profile: a bounded number of examples per property, no
  deadline (a slow example is not a failure: no timed assertions), not derandomised.
- Every run draws its own seed (``--hypothesis-seed`` or ``ENGRAM_FUZZ_SEED`` to replay one): printed in
  the header and again when a test failed. The schemathesis runs take the same seed.
- What was tried is tallied (Hypothesis examples per property, schemathesis cases per scope,
  the small fuzzes of /healthz, the inspector and MCP, and the server errors each met),
  printed at the end of the run and written to ``.engram/reports/bad-inputs.json``: the
  README's "bad inputs tried" row comes from that file.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import core, settings

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / ".engram" / "reports" / "bad-inputs.json"

settings.register_profile("engram", max_examples=int(os.environ.get("ENGRAM_HYPOTHESIS_EXAMPLES", "150")),
                          deadline=None, derandomize=False, print_blob=True)
# More of the same, for a search on purpose: HYPOTHESIS_PROFILE=engram-thorough scripts/test -m properties
settings.register_profile("engram-thorough", parent=settings.get_profile("engram"), max_examples=3000)
# Mutation testing (scripts/mutation): the same budget without the example database, so one
# mutant's failing examples are not replayed against the next (each verdict stands alone).
settings.register_profile("engram-mutation", parent=settings.get_profile("engram"), database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "engram"))

_SEED_DEST = "hypothesis_seed"
# The plugin's text for --hypothesis-show-statistics, per phase: "- 97 passing, 0 failing, and 3 invalid test cases".
_PHASE_CASES = re.compile(r"(\d+) passing, (\d+) failing, and (\d+) invalid test cases")

_tally: dict = {"hypothesis": {}, "schemathesis": {}, "fuzz": {}}


def run_seed() -> int:
    """This run's seed (every Hypothesis property and schemathesis run of the run starts from it)."""
    seed = core.global_force_seed
    return seed if isinstance(seed, int) else int.from_bytes(str(seed).encode()[:8].ljust(8, b"\0"), "big") % 2**32


def record(kind: str, label: str, *, cases: int, server_errors: int) -> None:
    """Tally ``cases`` inputs of ``kind`` ("schemathesis", "fuzz") under ``label`` (a scope, an
    endpoint) and the 5xx answers they met."""
    entry = _tally[kind].setdefault(label, {"cases": 0, "server_errors": 0})
    entry["cases"] += cases
    entry["server_errors"] += server_errors


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Before Hypothesis's own plugin reads the option. An xdist worker takes the controller's seed
    # (pytest_configure_node), so every worker of a run starts from the one seed printed.
    seed = getattr(config, "workerinput", {}).get("engram_fuzz_seed") or getattr(config.option, _SEED_DEST, None) \
        or os.environ.get("ENGRAM_FUZZ_SEED") or str(secrets.randbelow(2**32))
    setattr(config.option, _SEED_DEST, seed)
    core.global_force_seed = int(seed) if str(seed).isdigit() else seed


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # xdist, on the controller: the seed goes to each worker
    node.workerinput["engram_fuzz_seed"] = getattr(node.config.option, _SEED_DEST)


def pytest_report_header(config):
    seed = getattr(config.option, _SEED_DEST, None)
    return f"bad inputs: Hypothesis profile {settings.get_current_profile_name()!r}, seed {seed} " \
           f"(replay: --hypothesis-seed={seed}, or ENGRAM_FUZZ_SEED={seed} scripts/test)"


def pytest_runtest_makereport(item, call):
    if call.when != "call" or not (stats := getattr(item, "hypothesis_statistics", None)):
        return
    tried = sum(int(passing) + int(failing) for passing, failing, _ in _PHASE_CASES.findall(stats))
    # Properties of pure functions apart from the other Hypothesis tests (the fuzzes of live endpoints, state machines).
    key = ("property " if item.get_closest_marker("properties") else "other ") + item.nodeid
    _tally["hypothesis"][key] = _tally["hypothesis"].get(key, 0) + tried


def _merge(into: dict, other: dict) -> None:
    for nodeid, tried in other["hypothesis"].items():
        into["hypothesis"][nodeid] = into["hypothesis"].get(nodeid, 0) + tried
    for kind in ("schemathesis", "fuzz"):
        for label, entry in other[kind].items():
            mine = into[kind].setdefault(label, {"cases": 0, "server_errors": 0})
            for key in ("cases", "server_errors"):
                mine[key] += entry[key]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # xdist: a worker's tally comes back with it
    if raw := getattr(node, "workeroutput", {}).get("engram_bad_inputs"):
        _merge(_tally, json.loads(raw))


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        session.config.workeroutput["engram_bad_inputs"] = json.dumps(_tally)


def summary() -> dict:
    tests = _tally["hypothesis"]
    properties = {k.split(" ", 1)[1]: n for k, n in tests.items() if k.startswith("property ")}
    other = {k.split(" ", 1)[1]: n for k, n in tests.items() if k.startswith("other ")}
    by_module: dict[str, int] = defaultdict(int)
    for nodeid, tried in properties.items():
        by_module[nodeid.split("::")[0]] += tried
    server_errors = sum(e["server_errors"] for kind in ("schemathesis", "fuzz") for e in _tally[kind].values())
    return {"hypothesis": {"properties": len(properties), "examples": sum(properties.values()),
                           "by_module": dict(sorted(by_module.items())),
                           "other_tests": len(other), "other_examples": sum(other.values()),
                           "other": dict(sorted(other.items()))},
            "schemathesis": dict(sorted(_tally["schemathesis"].items())), "fuzz": dict(sorted(_tally["fuzz"].items())),
            "server_errors": server_errors}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not any(_tally.values()):
        return
    report = {"finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "seed": getattr(config.option, _SEED_DEST, None),
              "profile": settings.get_current_profile_name(), **summary()}
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=1) + "\n")
    write = terminalreporter.write_line
    terminalreporter.section("bad inputs tried")
    h = report["hypothesis"]
    write(f"Hypothesis: {h['examples']} examples over {h['properties']} properties of pure functions; "
          f"{h['other_examples']} examples over {h['other_tests']} other Hypothesis tests (profile {report['profile']!r})")
    for kind in ("schemathesis", "fuzz"):
        for label, entry in report[kind].items():
            write(f"{kind} {label}: {entry['cases']} cases, {entry['server_errors']} server errors")
    write(f"server errors: {report['server_errors']}; written to {REPORT.relative_to(ROOT)}")
    if exitstatus != 0:
        write(f"this run's seed: {report['seed']} (replay: --hypothesis-seed={report['seed']})", red=True)
