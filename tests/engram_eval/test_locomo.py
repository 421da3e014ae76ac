"""LoCoMo parsing, and the LoCoMo eval on tiny conversations through the real node."""

import json
from datetime import UTC, datetime

import pytest

from engram_core.es.schema import MemoryType, alias_name, shared_prefix
from engram_eval import locomo
from engram_eval.locomo import (
    evaluate_locomo,
    locomo_episodes,
    locomo_evidence,
    locomo_session_date,
    locomo_turn_id,
)
from memory_app.recall import memory_recall
from tenants.models import Tenant
from tenants.selectors import index_prefix_for


@pytest.mark.parametrize(("raw", "expected"), [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
    ("12:09 am on 2 January 2024", datetime(2024, 1, 2, 0, 9, tzinfo=UTC)),
])
def test_locomo_session_dates_parse(raw, expected):
    assert locomo_session_date(raw) == expected


def test_an_unrecognised_locomo_date_is_an_error():
    with pytest.raises(ValueError, match="unrecognised LoCoMo date"):
        locomo_session_date("yesterday")


def test_locomo_evidence_accepts_the_dataset_s_separators_and_drops_duplicates():
    assert locomo_evidence("26", ["D1:3", "D2:4; D2:5", "D1:3", "D10:12 D3:1", "not an id"]) == [
        "locomo-26-d1-3", "locomo-26-d2-4", "locomo-26-d2-5", "locomo-26-d10-12", "locomo-26-d3-1"]


def test_locomo_evidence_and_turn_ids_read_the_numbers_so_spacing_and_zeros_do_not_lose_a_turn():
    assert locomo_evidence("30", ["D3:012", "D 4 : 5", "D4:5,D6:7"]) == [
        "locomo-30-d3-12", "locomo-30-d4-5", "locomo-30-d6-7"]
    assert locomo_turn_id("30", "D3:12") == locomo_turn_id("30", "D03:012") == "locomo-30-d3-12"


def test_locomo_turns_become_dated_episodes_with_the_preceding_turns_as_context():
    data = {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hi Mel!"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look at this.", "blip_caption": "a sunset"},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "Lovely."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": "Back again."}],
    }
    episodes = locomo_episodes("26", data, context_turns=1)
    assert [e["id"] for e in episodes] == ["locomo-26-d1-1", "locomo-26-d1-2", "locomo-26-d1-3", "locomo-26-d2-1"]
    assert episodes[1]["text"] == "Melanie: Look at this. [shares a photo of a sunset]"
    assert episodes[0]["context"] is None  # nothing before the first turn
    assert episodes[2]["context"] == "Melanie: Look at this. [shares a photo of a sunset]"
    assert episodes[3]["context"] is None  # context never crosses sessions
    assert episodes[3]["occurred_at"] == datetime(2023, 6, 27, 10, 37, tzinfo=UTC)
    # The default sends no context at all: Engram derives it, as for any agent.
    assert all("context" not in e for e in locomo_episodes("26", data))
    assert all(e["session_id"] for e in locomo_episodes("26", data))


@pytest.mark.django_db(transaction=True)
def test_locomo_scores_evidence_by_turn_id_although_stored_ids_are_namespaced(tmp_path, es_admin,
                                                                               invalidate_minted_keys):
    # Imported episodes are stored under ids namespaced to the end-user; the eval must map them
    # back to the dataset's turn ids (it scored every question 0 before).
    data = {"speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey kitten named Pebble."},
                          {"speaker": "Bo", "dia_id": "D1:2", "text": "The weather was rainy all week."}],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I started learning the cello."}],
            "qa": [{"question": "What is the name of Ann's kitten?", "answer": "Pebble", "evidence": ["D1:1"],
                    "category": 1},
                   {"question": "Which instrument is Bo learning?", "answer": "cello", "evidence": ["D2:1"],
                    "category": 4}]}
    path = tmp_path / "77.json"
    path.write_text(json.dumps(data))
    summary = evaluate_locomo(paths=[path], log=lambda _m: None)
    assert summary["overall"]["n"] == 2
    assert summary["overall"]["R@5"] == 1.0


@pytest.mark.django_db(transaction=True)
def test_locomo_with_dedicated_puts_the_conversation_in_indices_of_its_own(tmp_path, es_admin, invalidate_minted_keys,
                                                                           monkeypatch):
    data = {"speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey kitten named Pebble."},
                          {"speaker": "Bo", "dia_id": "D1:2", "text": "The weather was rainy all week."}],
            "qa": [{"question": "What is the name of Ann's kitten?", "evidence": ["D1:1"], "category": 1}]}
    path = tmp_path / "78.json"
    path.write_text(json.dumps(data))
    seen = []

    def recall(*, subject, **kwargs):
        hits = memory_recall(subject=subject, explain=True, **kwargs)
        own_index = alias_name(MemoryType.EPISODIC, prefix=index_prefix_for(tenant=subject.tenant))
        seen.append((subject.tenant, {h["explain"]["fusion"] for h in hits},
                     es_admin.indices.exists(index=own_index).body, shared_prefix()))
        return hits

    monkeypatch.setattr(locomo, "memory_recall", recall)
    summary = evaluate_locomo(paths=[path], log=lambda _m: None, dedicated=True)

    assert summary["overall"]["R@5"] == 1.0
    [(tenant, fusions, existed, prefix)] = seen
    assert (tenant.isolation, fusions, existed) == ("dedicated", {"linear"}, True)
    assert prefix != shared_prefix()  # the run's own shared prefix, not the one serving memory
    assert not es_admin.indices.exists(index=f"{prefix}-*", allow_no_indices=False, ignore_unavailable=True)
    # The tenant stays as the record of the run, set back to shared: no dedicated indices to recreate.
    assert Tenant.objects.get(pk=tenant.pk).isolation == "shared"


def test_a_question_set_replaces_the_conversation_s_own_questions():
    from engram_eval.corpora import TEMPORAL_QUESTIONS
    from engram_eval.locomo import locomo_questions

    data = {"qa": [{"question": "Q?", "category": 2, "evidence": ["D1:1"]},
                   {"question": "Adversarial?", "category": 5, "evidence": ["D1:2"]}]}
    assert locomo_questions("7", data) == [("category 2", "Q?", ["locomo-7-d1-1"])]
    asked = {"conversations": {"7": [{"kind": "when", "question": "On which day?", "evidence": ["D2:3"]}]}}
    assert locomo_questions("7", data, questions=asked) == [("when", "On which day?", ["locomo-7-d2-3"])]
    assert locomo_questions("8", data, questions=asked) == []
    # The project's temporal set references the dev conversations' turns by id only.
    temporal = json.loads(TEMPORAL_QUESTIONS.read_text())
    for questions in temporal["conversations"].values():
        assert questions and all(q["kind"] in ("when", "dated", "relative") and q["evidence"] for q in questions)


def _tiny_conversation(name: str, speaker: str, pet: str) -> dict:
    return {"speaker_a": speaker, "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": speaker, "dia_id": "D1:1", "text": f"I adopted a {pet} named {name}."},
                          {"speaker": "Bo", "dia_id": "D1:2", "text": "The weather was rainy all week."}],
            "qa": [{"question": f"What is the name of {speaker}'s {pet}?", "evidence": ["D1:1"], "category": 4},
                   {"question": "How was the weather?", "evidence": ["D1:2"], "category": 2}]}


@pytest.mark.django_db(transaction=True)
def test_a_sweep_asks_under_each_value_and_scores_each_conversation_with_the_value_chosen_on_the_others(
        tmp_path, es_admin, invalidate_minted_keys, monkeypatch):

    from engram_eval.sweep import Sweep

    paths = []
    for name, (speaker, pet) in {"81": ("Ann", "kitten"), "82": ("Cy", "parrot"), "83": ("Di", "tortoise")}.items():
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(_tiny_conversation(f"Pet{name}", speaker, pet)))
    seen = []

    def recall(*, subject, ranking, **kwargs):
        seen.append((subject.external_id, ranking.session_coverage))
        hits = memory_recall(subject=subject, ranking=ranking, **kwargs)
        # Value 0.5 hides every hit of conversation 81: the sweep must not choose it on 81's figures.
        return [] if (subject.external_id, ranking.session_coverage) == ("conv-81", 0.5) else hits

    monkeypatch.setattr(locomo, "memory_recall", recall)
    imports = []
    real_import = locomo.import_by_client_id
    monkeypatch.setattr(locomo, "import_by_client_id", lambda **kw: imports.append(1) or real_import(**kw))
    report = locomo.sweep_locomo(paths=paths, sweep=Sweep("session_coverage", (0.0, 0.5)), folds=3,
                                 log=lambda _m: None)

    assert len(imports) == 3  # imported once, asked under each value
    assert sorted(seen) == sorted((f"conv-{c}", v) for c in ("81", "82", "83") for v in (0.0, 0.5) for _ in range(2))
    assert [f["held_out"] for f in report["folds"]] == [["81"], ["82"], ["83"]]
    assert report["each"][1]["81"]["overall"]["R@10"] == 0.0 and report["each"][0]["81"]["overall"]["R@10"] == 1.0
    # Holding out 82 or 83, value 0.5 loses on 81, so 0.0 is chosen; holding out 81, both tie on 82
    # and 83 and the earlier value (0.0) is kept.
    assert [f["chosen"] for f in report["folds"]] == [0.0, 0.0, 0.0]
    assert (report["cross_validated"]["overall"]["n"], report["cross_validated"]["overall"]["R@10"]) == (6, 1.0)

