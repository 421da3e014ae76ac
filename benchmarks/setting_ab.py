"""Recall latency with one setting at its default and at another value, on the LoCoMo sandbox
or on the corpus of ``scripts/bench``.

Run through ``scripts/bench`` (which starts its own Elasticsearch):

    scripts/bench --setting-ab --locomo ../shared/data/locomo-dev/26.json ../shared/data/locomo-dev/30.json \\
        --setting ENGRAM_CONCEPTS=false [--passes 10] [--asking-kind]
    scripts/bench --setting-ab --bench-corpus --setting ENGRAM_FUSION=rrf [--queries 400] [--passes 3]

``--bench-corpus``: the 10,407 memories of benchmarks/recall_latency.py (40 end-users × 250
episodes, 8 facts and 2 playbooks each, the fixture catalog), ``--queries`` of its questions,
each asked of a random end-user (the seed's), dated now. Otherwise the conversations are
imported as ``memory_eval --locomo`` imports them (one end-user each, with the defaults, so the
stored memories are the default's), and every category 1-4 question is asked. Each question is
asked ``--passes`` times with the setting at its default and at the value given, taking turns
question by question (and which goes first, pass by pass) so that the machine's load falls on
both alike, after ``--warmup`` untimed passes (a node just started has cold caches and an
unwarmed JIT); the query-vector cache is cleared before each call (a new question).
``--asking-kind``: only the questions that ask for members of a kind (memory_app.language.concepts'
``query_categories``), the ones concept expansion acts on. The value is read as JSON (false,
0, 0.25), else as a string.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_app.config.settings.dev")

import django  # noqa: E402

django.setup()

import recall_latency  # noqa: E402  (its timing and percentiles)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from engram_eval.locomo import locomo_episodes  # noqa: E402
from engram_eval.sandbox import sandbox  # noqa: E402
from memory_app import services  # noqa: E402
from memory_app.language import concepts  # noqa: E402
from tenants import services as tenant_services  # noqa: E402


def setting(text: str) -> tuple[str, object]:
    name, _, raw = text.partition("=")
    if not hasattr(settings, name):
        raise argparse.ArgumentTypeError(f"no such setting: {name}")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw


def bench_plan(*, queries: int, seed: int) -> list[tuple]:
    """The corpus of benchmarks/recall_latency.py, loaded as it loads it, and ``queries`` (end-user,
    question, now) to ask."""
    rng = random.Random(seed)
    corpus, sentences, questions = recall_latency.corpus_texts()
    now = datetime.now(UTC)
    tenant = recall_latency.bench_tenant(corpus, slug="setting-ab", name="Setting A/B")
    subjects = recall_latency.bench_subjects(
        tenant, count=40, episodes=250, rng=rng, sentences=sentences, now=now, facts=8,
        playbooks=recall_latency.bench_playbooks(corpus))
    return [(rng.choice(subjects), rng.choice(questions), now) for _ in range(queries)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus = parser.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--locomo", nargs="+", type=Path, help="LoCoMo conversation files")
    corpus.add_argument("--bench-corpus", action="store_true", help="the 10k corpus of scripts/bench")
    parser.add_argument("--queries", type=int, default=400, help="--bench-corpus: questions asked")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--setting", type=setting, required=True, help="NAME=value, the variant against the default")
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2, help="untimed passes first")
    parser.add_argument("--asking-kind", action="store_true", help="only questions that ask for a kind")
    args = parser.parse_args()
    name, value = args.setting
    call_command("migrate", verbosity=0)
    plan = []
    with sandbox() as box:
        if args.bench_corpus:
            plan = bench_plan(queries=args.queries, seed=args.seed)
        else:
            tenant = box.tenant(slug="setting-ab", name="Setting A/B")
        for path in args.locomo or ():
            data = json.loads(path.read_text())
            subject = tenant_services.subject_get_or_create(tenant=tenant, external_id=path.stem, actor="bench")
            episodes = locomo_episodes(path.stem, data)
            services.episodes_import(subject=subject, episodes=[
                {**e, "occurred_at": e["occurred_at"].isoformat()} for e in episodes])
            now = max(e["occurred_at"] for e in episodes)
            plan += [(subject, q["question"], now) for q in data["qa"] if q.get("category") in (1, 2, 3, 4)
                     and (not args.asking_kind or concepts.query_categories(q["question"]))]
        variants = [("default", {}), (f"{name}={json.dumps(value)}", {name: value})]
        samples: dict[str, list[float]] = {label: [] for label, _o in variants}
        for n in range(args.warmup + args.passes):
            for subject, question, now in plan:
                for label, overrides in (variants if n % 2 == 0 else variants[::-1]):
                    with override_settings(**overrides):
                        elapsed = recall_latency.new_question_ms(subject=subject, query=question, now=now)
                    if n >= args.warmup:
                        samples[label].append(elapsed)
    print(f"{len(plan)} questions x {args.passes} passes each way after {args.warmup} untimed "
          f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f})\n")
    print("| variant | recall p50 / p95 / p99 ms |\n|---|---|")
    for label, values in samples.items():
        print(f"| {label} | {recall_latency.percentiles_text(values)} |")


if __name__ == "__main__":
    main()
