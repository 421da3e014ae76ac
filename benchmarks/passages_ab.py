"""Sentence vectors and the passage leg, on and off, on the same day, machine and index.

Run through ``scripts/bench`` (which starts its own Elasticsearch):

    scripts/bench --passages [--episodes 17000] [--queries 400] [--seed 7]

Two end-users of one tenant get the same number of synthetic episodes (``benchmarks/scale_data``,
the scale curve's text) by bulk import, 1,000 per call: one with sentence vectors off
(``ENGRAM_EMBED_PASSAGES=false``: the release before them), one with them on (the default); each
import is timed. Then the same new questions (query-vector cache cleared before each call, after
``--warmup`` untimed ones) are asked four ways, taking turns question by question so that the
machine's load falls on all four alike:

- off/off: the end-user without passages, passage leg off (the previous release);
- on/on: the end-user with passages, passage leg on (this release's default);
- on/off: the end-user with passages, passage leg off (what the leg itself costs);
- off/on: the end-user without passages, passage leg on (an index of episodes stored before
  passages existed, searched by this release).

The default of 17,000 episodes is the scale curve's heavy end-user at 100k memories (20,000
memories, 87 % of them episodes).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

import recall_latency  # noqa: E402  (its timing and percentiles)
import scale_data  # noqa: E402
from memory_app import services  # noqa: E402
from engram_eval.sandbox import sandbox  # noqa: E402
from tenants import services as tenant_services  # noqa: E402
from tenants.models import Tenant  # noqa: E402

OFF = {"ENGRAM_EMBED_PASSAGES": False, "ENGRAM_RECALL_PASSAGES": False}
LEG_OFF = {"ENGRAM_RECALL_PASSAGES": False}
# (label, end-user, settings while recalling)
VARIANTS = [("off/off (previous release)", "off", OFF), ("on/on (default)", "on", {}),
            ("on/off (leg off)", "on", LEG_OFF), ("off/on (old episodes, leg on)", "off", {})]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=17000, help="episodes per end-user")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50, help="untimed questions first")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    synth = scale_data.Synth(args.seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with sandbox():
        tenant = Tenant.objects.create(slug="passages-ab", name="Passages A/B")
        subjects, rates = {}, {}
        for who, overrides in (("off", OFF), ("on", {})):
            with override_settings(**overrides):
                subject = tenant_services.subject_get_or_create(tenant=tenant, external_id=who, actor="bench")
                episodes = [synth.episode(who, n, start=start) for n in range(args.episodes)]
                started = time.perf_counter()
                for i in range(0, len(episodes), 1000):
                    services.episodes_import(subject=subject, episodes=episodes[i:i + 1000])
                rates[who] = len(episodes) / (time.perf_counter() - started)
                subjects[who] = subject
            print(f"imported {args.episodes} episodes, passages {who}: {rates[who]:.0f} episodes/s",
                  file=sys.stderr, flush=True)
        questions = [synth.question(n) for n in range(args.warmup + args.queries)]
        samples: dict[str, list[float]] = {label: [] for label, _w, _s in VARIANTS}
        for n, question in enumerate(questions):
            for label, who, overrides in VARIANTS[n % 4:] + VARIANTS[:n % 4]:
                with override_settings(**overrides):
                    elapsed = recall_latency.new_question_ms(subject=subjects[who], query=question)
                if n >= args.warmup:
                    samples[label].append(elapsed)
    print(f"{args.episodes} episodes per end-user, {args.queries} new questions each way "
          f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f})\n")
    print("| end-user's episodes / passage leg | recall p50 / p95 / p99 ms |\n|---|---|")
    for label, values in samples.items():
        print(f"| {label} | {recall_latency.percentiles_text(values)} |")
    print(f"\nbulk import, 1,000 episodes per call: passages off {rates['off']:.0f}, "
          f"on {rates['on']:.0f} episodes/s")


if __name__ == "__main__":
    main()
