"""The rules extractor, grounding and resolution as pure functions (no cluster needed)."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memory_app.consolidation.extractors import Episode, FactCandidate
from memory_app.consolidation.extractors.rules import RulesExtractor, infer_slot
from memory_app.consolidation.extractors.speech import StatementRules
from memory_app.consolidation.grounding import is_grounded, ungrounded_words
from memory_app.consolidation.resolve import Duplicates, StoredFact, quantities, resolve_fact, same_value


def _extract(*texts: str, context: tuple[str, ...] = ()):
    eps = [Episode(id=f"e{n}", text=t, occurred_at=f"2025-01-01T00:{n:02d}:00", session_id="s")
           for n, t in enumerate(texts, start=len(context))]
    ctx = [Episode(id=f"e{n}", text=t, occurred_at=f"2025-01-01T00:{n:02d}:00", session_id="s")
           for n, t in enumerate(context)]
    return RulesExtractor().extract(episodes=eps, context=ctx)


@pytest.mark.parametrize("text, fact, slot, change", [
    ("My favourite colour is blue.", "User's favourite colour is blue.", "attr:favourite_color", None),
    ("I moved to Berlin last month.", "User lives in Berlin.", "home", "natural"),
    ("Oh, I work as a nurse.", "User works as a nurse.", "occupation", None),
    ("I prefer tea over coffee", "User prefers tea over coffee.", "prefers:coffee|tea", None),
    ("I no longer like jazz", "User no longer likes jazz.", "likes:jazz", "natural"),
    ("Caroline: I'm allergic to peanuts", "Caroline is allergic to peanuts.", "caroline:allergy:peanut", None),
    ("My new car is a blue Tesla.", "User's car is a blue Tesla.", "attr:car", "natural"),
    ("Correction: my phone number is 555 0101.", "User's phone number is 555 0101.", "attr:phone_number", "harsh"),
    # A period after a title or an initial does not end the value.
    ("My dentist is Dr. Moura.", "User's dentist is Dr. Moura.", "attr:dentist", None),
    ("Our landlord is J. R. Smith.", "User's landlord is J. R. Smith.", "relation:landlord", None),
    # "still", "actually", "again" say the value holds or how it is said, not what it is.
    ("My weekly mileage is 45 km still.", "User's weekly mileage is 45 km.", "attr:weekly_mileage", None),
    ("I love baking bread still, sourdough mostly.", "User likes baking bread.", "likes:baking_bread", None),
    ("I'm originally from Leeds actually.", "User is from Leeds.", "hometown", None),
    # "My work is as X" says what "I work as X" says; "now" may come before the verb.
    ("My work now is as a librarian, not a translator.", "User works as a librarian.", "occupation", "natural"),
    # A label in front of the statement, and the time of a move, are not part of the fact.
    ("Big news: I moved to Braga last week.", "User lives in Braga.", "home", "natural"),
    ("I moved to Liverpool at the weekend.", "User lives in Liverpool.", "home", "natural"),
    # The attribute's head noun decides whether it is chatter: a goal race is a race.
    ("My goal race is the Berlin Marathon.", "User's goal race is the Berlin Marathon.", "attr:goal_race", None),
    # A single relation named by name is one slot, however it is phrased.
    ("My roommate's name is Jess Park.", "User's roommate's name is Jess Park.", "relation:roommate", None),
    ("My new roommate is Aisha.", "User's roommate is Aisha.", "relation:roommate", "natural"),
    ("My roommate is a student.", "User's roommate is a student.", "attr:roommate", None),
])
def test_first_person_statements(text, fact, slot, change):
    [candidate] = _extract(text).facts
    assert (candidate.text, candidate.slot, candidate.change) == (fact, slot, change)


@pytest.mark.parametrize("text", ["my head is killing me", "My problem is the app.", "I like you", "My day is fine",
                                  "What's my favourite colour?", "My point is not that.",
                                  "My plan for the weekend is to rest.", "My biggest worry is the rain.",
                                  # A value that is a pronoun stands for something said before.
                                  "I like those old board games", "I love making him laugh", "I like to."])
def test_chatter_gives_no_fact(text):
    assert _extract(text).facts == []


def test_a_patterns_value_is_worded_as_its_holders():
    [fact] = _extract("Rosa: I love finding old maps for my shop.").facts
    assert fact.text == "Rosa likes finding old maps for Rosa's shop."
    [fact] = _extract("I prefer our allotment over my balcony.").facts
    assert fact.text == "User prefers User's allotment over User's balcony."


def test_bare_correction_applies_to_the_last_fact_of_the_session():
    facts = _extract("I'm 38 years old.", "Actually, it's 39.").facts
    assert [(f.text, f.slot, f.change) for f in facts] == [("User is 38 years old.", "age", None),
                                                           ("User is 39 years old.", "age", "harsh")]
    # The corrected fact's turn says the rest of the sentence ("years old"), so both are cited.
    assert facts[1].episode_ids == ("e0", "e1")
    [_, corrected] = _extract("My favourite race is the Great North Run.",
                              "Sorry, I meant the Manchester Half.").facts
    assert (corrected.text, corrected.episode_ids, corrected.change, corrected.replaces) == (
        "User's favourite race is the Manchester Half.", ("e0", "e1"), "harsh", "the Great North Run")
    assert is_grounded(corrected.text, ["My favourite race is the Great North Run.",
                                        "Sorry, I meant the Manchester Half."])


def test_problem_steps_outcome_and_context():
    out = _extract("Still broken.", "I power cycled the hub.", "That worked!",
                   context=("My hub is offline.", "I unplugged the hub."))
    # Context supplies the problem; only outcomes in the new episodes are proposed.
    assert [(p.trigger, p.steps, p.outcome) for p in out.playbooks] == [
        ("The hub is offline", "1. Unplugged the hub", False),
        ("The hub is offline", "1. Power cycled the hub", True)]
    assert out.playbooks[1].outcome_episode_id == "e4"


_STATUS = st.sampled_from(["Works now", "It works now", "Working again now", "All good now", "Fixed now",
                            "Problem solved", "That did the trick", "Still not working", "No luck"])
_AFTER = st.sampled_from(["", ", the hall light comes on when I walk past", " after I unplugged my router",
                          " since I moved my hub to the kitchen", ", thanks for the help with my thermostat"])


@settings(max_examples=100, deadline=None)
@given(_STATUS, _AFTER, st.booleans())
def test_an_outcome_is_a_momentary_status_never_a_fact(status, after, problem_before):
    """"Works now, ..." says how a thing stands at the moment: with an open problem it is the
    playbook's outcome, without one it is nothing; never a fact."""
    context = ("My hub is offline.", "I unplugged the hub.") if problem_before else ()
    out = _extract(f"{status}{after}.", context=context)
    assert out.facts == [], out.facts


def test_infer_slot_reads_third_person_facts():
    assert infer_slot("User lives in Lisbon.") == ("home", "Lisbon")
    assert infer_slot("User's favourite colour is blue.") == ("attr:favourite_color", "blue")
    assert infer_slot("The sky is blue.") == (None, None)


def test_grounding():
    episodes = ["I moved to Berlin last month, my new favourite colour is green"]
    assert is_grounded("User lives in Berlin.", episodes)
    assert is_grounded("User's favorite color is green.", episodes)  # spelling variants
    assert ungrounded_words("User lives in Munich.", episodes) == ["munich"]
    assert not is_grounded("User lives.", episodes)  # no content word at all


def test_numbers_and_dates():
    assert quantities("March 3rd, 1990") == quantities("3 March 1990")
    assert same_value("March 3rd, 1990", "3 March 1990")
    assert not same_value("555 0101", "555 0102")
    assert not same_value("Paris", "Berlin")


def _fact(i, text, slot=None, value=None, cosine=0.0):
    return StoredFact(id=i, text=text, slot=slot, value=value, cosine=cosine)


# The settings' defaults (config/settings/base.py), as a run reads them at its entry.
DUPLICATES = Duplicates(merge_cosine=0.90, lexical=85.0, cosine=0.88)


def test_resolution_merges_supersedes_and_leaves_unrelated_alone():
    c = FactCandidate(text="User lives in Berlin.", episode_ids=("e1",), slot="home", value="Berlin")
    assert resolve_fact(c, new_id="n", neighbours=[_fact("a", "User lives in Berlin.", "home", "Berlin")],
                        exists=False, duplicates=DUPLICATES).kind == "merge"
    action = resolve_fact(c, new_id="n", neighbours=[_fact("a", "User lives in Paris.", "home", "Paris"),
                                                     _fact("b", "User's sister lives in Paris.", cosine=0.8)],
                          exists=False, duplicates=DUPLICATES)
    assert (action.kind, action.supersedes, action.contradiction) == ("supersede", ["a"], "natural")
    # Nearly the same words but a number differs: never merged.
    n = FactCandidate(text="User has 3 kids.", episode_ids=("e1",))
    assert resolve_fact(n, new_id="n", neighbours=[_fact("a", "User has 2 kids.", cosine=0.97)],
                        exists=False, duplicates=DUPLICATES).kind == "create"
    # Same words, no slot, vectors agree: merged.
    assert resolve_fact(FactCandidate(text="User has two kids.", episode_ids=("e2",)), new_id="n",
                        neighbours=[_fact("a", "User has two kids.", cosine=0.99)], exists=False, duplicates=DUPLICATES).kind == "merge"
    # A different slot never supersedes.
    other = FactCandidate(text="User works at Siemens.", episode_ids=("e1",), slot="employer", value="Siemens")
    assert resolve_fact(other, new_id="n", neighbours=[_fact("a", "User lives in Paris.", "home", "Paris")],
                        exists=False, duplicates=DUPLICATES).kind == "create"


_PIECES = ("I moved to Leith in May", "you should see my garden", "my dog Pepper loves the beach", "how about you",
           "thanks Tomas", "so sorry about your cat", "I joined a choir", "your bike looks great", "we went hiking",
           "I'm so happy for you", "my sister lives in Porto", "is that yours", "I love your photos", "me too")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from([". ", "! ", "? ", ", ", " - "])),
                min_size=1, max_size=6), st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4))
def test_a_fact_holds_its_own_speakers_words_never_the_listeners(pieces, reply):
    """The other speaker's words are never a fact: each fact cites one turn, names its speaker and
    says nothing to (or of) the listener."""
    rosa = "Rosa: " + "".join(p + sep for p, sep in pieces)
    tomas = "Tomas: " + ". ".join(reply) + "."
    turns = [Episode(id="e0", text=rosa, occurred_at="2025-01-01T00:00:00", session_id="s"),
             Episode(id="e1", text=tomas, occurred_at="2025-01-01T00:01:00", session_id="s")]
    for fact in RulesExtractor().extract(episodes=turns, context=[]).facts:
        speaker = {"e0": "Rosa", "e1": "Tomas"}[fact.episode_ids[0]]
        assert len(fact.episode_ids) == 1 and speaker in fact.text, fact
        assert not re.search(r"\b(?:you|your|yours|Tomas)\b" if speaker == "Rosa" else r"\b(?:you|your|Rosa)\b",
                             fact.text), fact


# Issue 68's seventh pass: the classes hand-labelled sample "g" kept as facts. Our own words.
_OWN_THING = st.sampled_from(["my old bike", "my sister's bakery", "our flat in Leith", "my pottery wheel",
                              "the choir I sing in", "my garden shed"])


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["He", "She", "It", "That", "This", "They", "It's", "That's", "They've", "He's"]),
       st.sampled_from(["hid a sock under", "has been great for", "was a gift for", "means so much with",
                        "is a close friend of", "kept me going through", "sits right beside"]),
       _OWN_THING, st.booleans())
def test_a_sentence_leaning_on_a_referent_elsewhere_is_no_fact_of_its_own(lead, verb, thing, resolved_before):
    """"He buried a sock under my bed": alone, "he" names no one a fact could be about. Said after a
    statement of the same turn it continues that statement; first in the turn it is no fact."""
    before = "I adopted a terrier named Pip in Leith. " if resolved_before else ""
    facts = [f.text for f in _extract(f"Rosa: {before}{lead} {verb} {thing}.").facts]
    assert not any(re.match(rf"{re.escape(lead)}\b", f) for f in facts), facts
    if resolved_before:
        assert any(f.startswith("Rosa adopted a terrier") for f in facts), facts


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["It's been a lot", "They've been there through it all", "That was a tough call",
                        "It took a while"]),
       st.sampled_from([", ", " - ", " but "]),
       st.sampled_from(["I've known my neighbours in Leith for 6 years", "I moved my pottery wheel to the shed",
                        "I joined the harbour choir in May"]))
def test_a_clause_about_the_speaker_after_a_leaning_one_stays_without_it(lead, joint, clause):
    """"They've stood by me, I've known these neighbours for 6 years": the first
    clause leans on what was said before; the clause about the speaker after it is still a fact."""
    facts = [f.text for f in _extract(f"Rosa: {lead}{joint}{clause}.").facts]
    assert facts and all(f.startswith("Rosa") for f in facts), facts


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["we all have", "we're both on", "we all need", "we both want", "we can make", "we gotta keep",
                        "we need to find"]),
       st.sampled_from(["different paths", "a push sometimes", "a difference in the world", "our own roads",
                        "some peace inside"]))
def test_a_groups_maxim_is_no_fact(front, rest):
    """"We're both on different paths", "we all need a nudge": what holds of everyone, said as "we"."""
    assert not _extract(f"Rosa: I think {front} {rest}.").facts
    assert not _extract(f"Rosa: {front.capitalize()} {rest}.").facts


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["Pets", "Music", "Setbacks", "Tough times", "Dogs", "Nature", "Hard work"]),
       st.sampled_from(["bring such comfort to us", "can help us reach our goals", "always cheer us up",
                        "are lighter with mates who care", "brings us together"]))
def test_a_general_truth_said_of_us_is_no_fact(subject, rest):
    """"Cats bring such comfort to us": the subject is general and "us" is everyone."""
    assert not _extract(f"Rosa: {subject} {rest}.").facts


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["went hiking in the Pentlands", "adopted a second cat named Bailey",
                        "rented a flat near the harbour", "raised 300 pounds for the food bank"]))
def test_what_a_group_did_is_still_a_fact(done):
    """The maxim class leaves alone what the speaker's group did ("we rented a flat near ...")."""
    assert _extract(f"Rosa: Last month we {done}.").facts


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["", " really", " still", " also"]), st.sampled_from(["don't like", "haven't sold", "don't own"]),
       st.sampled_from(["my old bike", "my sister's bakery", "our flat by the docks", "my pottery wheel"]))
def test_a_negated_statement_about_the_speaker_is_grounded_in_its_turn(adverb, verb, thing):
    """"I still haven't sold my old bike" → "Rosa still hasn't sold ...": the agreeing auxiliary is
    the turn's own word, so the fact is grounded and written (it was dropped as ungrounded)."""
    turn = f"Rosa: I{adverb} {verb} {thing} in Leith."
    facts = _extract(turn).facts
    assert facts and all(is_grounded(f.text, [turn]) for f in facts), facts


# Issue 68's eighth pass: our own words.
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["The last year has been a hard road.", "Running the shop was really tough.",
                        "Things have been rough at the bakery."]),
       st.sampled_from(["I'm determined to finish", "I'm gonna make it work with", "I'm staying focused on",
                        "But I'm sure I'll sort out"]),
       _OWN_THING)
def test_coping_whose_hardship_is_the_sentence_before_is_no_fact(hardship, coping, thing):
    """"It's been a hard road. I'm determined to ...": the coping is read with its hardship, as when
    both are in one sentence."""
    facts = [f.text for f in _extract(f"Rosa: {hardship} {coping} {thing}.").facts]
    assert not facts, facts


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["This little village", "That old farmhouse", "This quiet town by the sea"]),
       st.sampled_from(["is where I was born", "is where I grew up", "is where I spent my summers"]),
       st.booleans())
def test_a_demonstrative_with_its_own_noun_names_its_thing(place, rest, first):
    """"This little village is where I grew up": the demonstrative brings its own noun, so the
    sentence names its thing and is a fact about the place the speaker grew up in."""
    before = "" if first else "Hi there! "
    facts = [f.text for f in _extract(f"Rosa: {before}{place} {rest}.").facts]
    noun = place.split(" ", 1)[1]
    assert any(noun in f and "Rosa" in f for f in facts), facts
    assert not any(f.startswith(("This", "That")) for f in facts), facts


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["I took up archery two years ago", "I started learning the cello",
                        "I joined a choir last spring"]),
       st.sampled_from([", and ", " - ", ", ", " and "]),
       st.sampled_from(["it keeps me calm", "it keeps me sane", "it was so much fun", "it helps me unwind",
                        "something odd happened"]))
def test_a_statement_before_a_clause_leaning_on_it_is_kept_on_its_own(head, sep, tail):
    """"I took up archery, and it keeps me calm": "it" is the archery named just before; the
    statement stands on its own, the appraisal after it names nothing more."""
    assume(not (sep == ", " and tail.startswith("something")))  # "archery, something odd": says what archery is
    facts = [f.text for f in _extract(f"Rosa: {head}{sep}{tail}.").facts]
    noun = next(word for word in ("archery", "cello", "choir") if word in head)
    assert any(noun in f and f.startswith("Rosa") for f in facts), facts
    assert not any(re.search(r"\b(?:it|something)\b", f) for f in facts), facts


@pytest.mark.parametrize("said", ["I won't worry, it will all work out.", "I did it, and it was worth it.",
                                  "I love it and it means the world to me.", "I'm so grateful, it means a lot.",
                                  "I played one with my cousin last night, and it was great.",
                                  "I stayed there with my cousin for a week, and it was great."])
def test_a_first_clause_that_is_no_statement_keeps_a_leaning_sentence_dropped(said):
    assert not _extract(f"Rosa: {said}").facts


@pytest.mark.parametrize("said", ["I was going to quit the choir after the move, but I'm sticking with it.",
                                  "I was going to quit archery, but I'm sticking with it.",
                                  "I nearly sold the kayak, yet I kept it."])
def test_a_head_is_never_cut_from_the_but_clause_that_revises_it(said):
    """"I was going to quit archery, but I'm sticking with it": the head alone would say the opposite."""
    facts = [f.text for f in _extract(f"Rosa: {said}").facts]
    assert all(re.search(r"\b(?:but|yet)\b", f) for f in facts), facts


_PEOPLE = {"she": ["my sister", "my mum", "my aunt", "Priya", "Greta"], "he": ["my brother", "my dad", "my uncle",
                                                                            "Malik", "Tomas"]}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["she", "he"]), st.integers(min_value=0, max_value=2), st.data(), st.booleans(),
       st.sampled_from(["taught me to paint in 2019", "gave me my first guitar in Porto",
                        "got me into rock climbing at the harbour gym"]))
def test_a_pronoun_is_read_as_the_one_person_named_before_it(pronoun, count, data, previous_turn, rest):
    """"Have you met my sister? She taught me to paint": with exactly one person named before the
    pronoun (earlier in the turn, or in the speaker's previous turn) the sentence is about that
    person; with none or two it names no one and stays dropped. The listener, named or answering in
    between, is never the one meant."""
    named = data.draw(st.lists(st.sampled_from(_PEOPLE[pronoun]), min_size=count, max_size=count, unique=True))
    ask = {0: "Jon, have you ever been to Porto?", 1: f"Jon, have you met {named[0] if named else ''}?",
           2: f"Jon, have you met {' and '.join(named)}?"}[count]
    said = f"{pronoun.capitalize()} {rest}."
    rules = RulesExtractor(statements=StatementRules(resolve=True))
    texts = [f"Rosa: {ask}", "Jon: Not yet, my cousin Dario says hi.", f"Rosa: {said}"] if previous_turn else [
        f"Rosa: {ask} {said}"]
    eps = [Episode(id=f"e{n}", text=t, occurred_at=f"2025-01-01T00:{n:02d}:00", session_id="s")
           for n, t in enumerate(texts)]
    facts = [f.text for f in rules.extract(episodes=eps, context=[]).facts if rest.split()[-1] in f.text]
    assert not any(re.search(r"\b(?:Jon|Dario|cousin|[Hh]e|[Ss]he)\b", f) for f in facts), facts
    if count == 1:
        who = named[0].replace("my ", "Rosa's ")
        assert facts and all(f.startswith(who[0].upper() + who[1:]) for f in facts), facts
    else:
        assert not facts, facts


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=2),
       st.lists(st.sampled_from(["guitar", "kayak", "greenhouse", "bakery", "van", "bicycle"]), min_size=2, max_size=2,
                unique=True),
       st.sampled_from(["old ", "new ", ""]),
       st.sampled_from(["was built by my grandad in 1975", "came from my uncle in Porto",
                        "cost me a fortune in 2020"]))
def test_it_is_read_as_the_one_thing_of_the_speaker_s_named_just_before(count, nouns, adjective, rest):
    """"Have you seen my old kayak? It was built by my grandad": with exactly one thing of the
    speaker's named in the sentence before, "it" is that thing; with none or two, it stays dropped."""
    ask = {0: "Jon, have you ever been to Porto?", 1: f"Jon, have you seen my {adjective}{nouns[0]}?",
           2: f"Jon, have you seen my {adjective}{nouns[0]} and my {nouns[1]}?"}[count]
    extractor = RulesExtractor(statements=StatementRules(resolve=True))
    eps = [Episode(id="e0", text=f"Rosa: {ask} It {rest}.", occurred_at="2025-01-01T00:00:00", session_id="s")]
    facts = [f.text for f in extractor.extract(episodes=eps, context=[]).facts if rest.split()[-1] in f.text]
    assert not any(re.match(r"It\b", f) for f in facts), facts
    if count == 1:
        assert facts and all(f.startswith(f"Rosa's {adjective}{nouns[0]}") for f in facts), facts
    else:
        assert not facts, facts


# Issue 68's twelfth pass: our own words.
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["I joined the harbour choir in Leith in May",
                        "I took my kids to the aquarium in Porto last week",
                        "I organised a bake sale for the Leith food bank on Saturday"]),
       st.sampled_from([", and ", " - ", ", ", " and "]),
       st.sampled_from(["it was so much fun", "it was really special", "it's been a lovely way to unwind",
                        "that was awesome", "it was really powerful", "it really spurred me on"]))
def test_how_it_was_after_a_statement_naming_two_things_is_cut_off(head, sep, tail):
    """"I joined the choir in Leith in May, and it was so much fun": the statement names its things
    (so ``vague`` keeps it); the clause on "it" after it says how it was, nothing more of the speaker."""
    episode = Episode(id="e1", text=f"Rosa: {head}{sep}{tail}.", occurred_at="2025-01-01T00:01:00", session_id="s")
    extractor = RulesExtractor(statements=StatementRules(how_it_was=True))
    facts = [f.text for f in extractor.extract(episodes=[episode], context=[]).facts]
    noun = next(word for word in ("choir", "aquarium", "bake sale") if word in head)
    assert any(noun in f and f.startswith("Rosa") for f in facts), facts
    assert not any(re.search(r"\b(?:it|that)\b", f, re.I) for f in facts), facts


@pytest.mark.parametrize("said", ["I quit the harbour choir in May, and it was hard, but I'm back with them now.",
                                  "I adopted a puppy from the Leith shelter, and it's a golden retriever named Max."])
def test_what_follows_it_that_tells_more_of_the_speaker_is_not_cut(said):
    episode = Episode(id="e1", text=f"Rosa: {said}", occurred_at="2025-01-01T00:01:00", session_id="s")
    facts = [f.text for f in RulesExtractor(statements=StatementRules(how_it_was=True)).extract(
        episodes=[episode], context=[]).facts]
    assert any(re.search(r"\b(?:back|Max)\b", f) for f in facts), facts


@pytest.mark.parametrize("turns, kept", [
    (["Rosa: Ana and I went to McGee's bar. She loves a good lager.",
      "Rosa: She and I are off to a hockey match on Sunday."], "Ana"),
    (["Rosa: She and I are off to a hockey match on Sunday."], None),
])
def test_she_and_i_is_read_with_the_one_person_named_before(turns, kept):
    """"She and I are off to a match" after naming Ana: Ana and the speaker; with no one named
    before, "she" is no one a fact could name, so nothing is written."""
    facts = [f.text for f in _extract(*turns).facts if "hockey" in f.text]
    if kept is None:
        assert not facts, facts
    else:
        assert facts and all(f.startswith(f"{kept} and Rosa") or f.startswith(f"Rosa and {kept}") for f in facts), facts
    assert not any(re.match(r"(?:She|He) and", f) for f in facts), facts
