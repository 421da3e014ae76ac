"""Reading a conversation turn as statements about its speaker (pure functions).

Every sentence here is written for this project; none comes from a benchmark conversation (a test
below checks the consolidation code, tests and docs against the LoCoMo dev conversations).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memory_app.consolidation.extractors.lexicon import lexicon
from memory_app.consolidation.extractors.speech import (
    StatementRules,
    anchors,
    family_context,
    is_base_verb,
    is_imperative,
    own_part,
    plain,
    read,
    sentences,
    speaker_subject,
    split_speaker,
    strip_opener,
    strip_vocative,
    third_person,
    third_singular,
    with_subject,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("sentence, rewritten", [
    ("I love painting landscapes.", "Rosa loves painting landscapes."),
    ("I really try to go every week.", "Rosa really tries to go every week."),
    ("I built that bookshelf last year!", "Rosa built that bookshelf last year!"),
    ("I went camping with my kids.", "Rosa went camping with Rosa's kids."),
    ("I'm swamped with work.", "Rosa is swamped with work."),
    ("I've been painting for years.", "Rosa has been painting for years."),
    ("I don't like jazz.", "Rosa doesn't like jazz."),
    ("I read a book last week.", "Rosa read a book last week."),
    ("I wanna open a studio.", "Rosa wants to open a studio."),
])
def test_first_person_becomes_third_person_about_the_speaker(sentence, rewritten):
    assert third_person(sentence, name="Rosa") == rewritten


def test_we_is_the_speaker_with_others_or_family():
    assert third_person("We went camping.", name="Tomas") == "Tomas and others went camping."
    assert third_person("We went camping.", name="Tomas", family=True) == "Tomas and family went camping."


def test_verb_forms_come_from_wordnet():
    assert is_base_verb("love") and is_base_verb("go") and is_base_verb("need")
    assert not is_base_verb("went") and not is_base_verb("painted") and not is_base_verb("could")
    assert not is_base_verb("read", past_context=True) and is_base_verb("read")
    assert [third_singular(v) for v in ("go", "try", "have", "watch", "play")] == [
        "goes", "tries", "has", "watches", "plays"]


@pytest.mark.parametrize("sentence, about_speaker, why", [
    ("I joined a choir at the community centre in March.", True, ""),
    ("I'm training to become a nurse after college.", True, ""),
    ("Did you ever try rock climbing?", False, "question"),
    ("You'd be a great teacher!", False, "address"),
    ("I love that!", False, "few_words"),  # a reaction, nothing stated
    ("The colours really blend nicely.", False, "not_about_speaker"),
    ("My left knee hurts after long runs.", True, ""),  # a sentence starts with a capital
    ("Our dog sleeps in the garden shed.", True, ""),
    ("The US open starts next week.", False, "not_about_speaker"),  # "US" is not "us"
    ("I bet the weather will turn soon.", False, "stance"),  # a stance taken in the exchange
    ("I totally agree with the plan for the garden shed.", False, "stance"),
    ("Keep me posted on the results.", False, "request"),  # a bare imperative
    ("I won't ever give up on trying harder.", False, "no_anchor"),  # names nothing a fact is about
    ("I hope to visit Lisbon in May.", True, ""),  # a hope with a plan is a plan
])
def test_what_counts_as_a_statement_about_the_speaker(sentence, about_speaker, why):
    reading = read(sentence)
    assert (reading.about_speaker, reading.why) == (about_speaker, why)


LOOSE = StatementRules(min_content=2, feelings=0, modal=0, vague=1, others=0, showing=False, alone=False)


def test_the_statement_rules_drop_feelings_suggestions_and_intentions_when_asked():
    feeling = "I'm so pumped for the camping trip."
    assert read(feeling, rules=LOOSE).about_speaker
    assert read(feeling, rules=replace(LOOSE, feelings=2)).why == "feeling"
    assert read(feeling).about_speaker  # the default drops a feeling only when nothing is named after it
    assert read("With the bakery opening downtown I'm staying positive.").why == "feeling"
    assert read("I'm excited about the pottery class.", rules=replace(LOOSE, feelings=1)).about_speaker
    assert read("I'm excited about the pottery class.", rules=replace(LOOSE, feelings=2)).why == "feeling"
    assert read("With the new job I'm staying positive.", rules=replace(LOOSE, feelings=1)).why == "feeling"
    # Holding up names nothing of its own, whatever follows it (issue 68's sixth pass; it was kept before).
    assert read("I'm staying positive about the garden.", rules=replace(LOOSE, feelings=1)).why == "feeling"
    assert read("I'm excited about the pottery class in May.").about_speaker  # a thing after the feeling stays
    suggestion = "Maybe we should plan a picnic by the river."
    assert read(suggestion, rules=LOOSE).about_speaker
    assert read(suggestion, rules=replace(LOOSE, modal=1)).why == "hypothetical"
    assert read("I will paint the fence again.", rules=replace(LOOSE, modal=2)).why == "hypothetical"
    assert read("I will paint the fence on Saturday.", rules=replace(LOOSE, modal=2)).about_speaker
    assert read("Painting the fence took my whole weekend.", rules=replace(LOOSE, subject=True)).why == (
        "not_about_speaker")
    assert read("Last week, I painted the fence.", rules=replace(LOOSE, subject=True)).about_speaker


def test_the_others_rule_drops_what_a_group_holds_but_keeps_what_it_did():
    maxim = "We all have our own roads through the hard seasons."
    assert read(maxim, rules=LOOSE).why == "maxim"  # a group's maxim is no fact, whatever ``others`` says
    assert read(maxim, rules=replace(LOOSE, others=1)).why == "others"
    assert read("We hike the ridge trail above Leith every Sunday.", rules=LOOSE).about_speaker  # others 0: kept
    assert read("We drove to the coast for the lantern festival.", rules=replace(LOOSE, others=1)).about_speaker
    assert read("We even drove to the coast for the festival.", rules=replace(LOOSE, others=1)).about_speaker
    assert read("We drove to the coast for the festival.", rules=replace(LOOSE, others=2)).why == "others"
    # The speaker's own "I" or a family word makes it the speaker's statement; so does a turn naming family.
    assert read("We all love the lake cabin my uncle built.", rules=replace(LOOSE, others=2)).about_speaker
    assert read("We love the lake cabin up north.", rules=replace(LOOSE, others=2), family=True).about_speaker
    assert read("Our band plays at the harbour pub on Fridays.", rules=replace(LOOSE, others=2)).about_speaker


def test_vague_two_drops_a_first_clause_leaning_on_what_was_said_before():
    lean = replace(LOOSE, vague=2)
    for sentence in ("I get them from markets and fairs in the north.", "I stayed there for a week in July.",
                     "I made it at my evening class on Monday.", "I have been one since 2019."):
        assert read(sentence, rules=replace(LOOSE, vague=1)).about_speaker, sentence
        assert read(sentence, rules=lean).why == "vague", sentence
    for sentence in ("There is a bakery near my flat in Leith.", "I have one dog and two cats at home.",
                     "I visited one of the castles in Scotland.", "I got a puppy in May, and named it Biscuit."):
        assert read(sentence, rules=lean).about_speaker, sentence


def test_showing_drops_what_is_shown_to_the_listener():
    shown = "Here's a snap of my vegetable patch in July."
    assert read(shown, rules=LOOSE).about_speaker
    assert read(shown, rules=replace(LOOSE, showing=True)).why == "showing"
    assert read("I planted a vegetable patch in July, take a look.", rules=replace(LOOSE, showing=True)).why == (
        "showing")
    assert read("I planted a vegetable patch in July.", rules=replace(LOOSE, showing=True)).about_speaker
    # "pic" is a word, not a piece of "picnic".
    assert read("I packed a picnic for the lake in July.", rules=replace(LOOSE, showing=True)).about_speaker


def test_a_sentence_without_its_subject_is_a_fragment_unless_a_past_verb_begins_it():
    assert read("Really made me rethink my whole garden plan.").why == "fragment"
    assert read("Is the tool that helped me fix my bike.").why == "fragment"
    assert with_subject("Went to the harbour market with my sister.") == "I went to the harbour market with my sister."
    assert with_subject("Painted the shed door last weekend.") == "I painted the shed door last weekend."
    assert with_subject("Had a picnic by the canal.") == "I had a picnic by the canal."
    for kept in ("Been a long winter.", "Broken phone again.", "Garden looks lovely.", "I went home.", ""):
        assert with_subject(kept) == kept


def test_alone_reads_an_opening_it_as_its_own_statement():
    sentence = "They kept me going, I've known these neighbours for 6 years since I moved to Leith."
    assert read(sentence).follow_up
    reading = read(sentence, rules=replace(LOOSE, alone=True), alone=True)
    assert reading.about_speaker and not reading.follow_up
    assert read(sentence, rules=replace(LOOSE, alone=True)).follow_up  # a statement before it: a follow-up


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_putting_the_subject_back_never_raises_and_changes_only_the_front(text):
    out = with_subject(text)
    assert out == text or (out.startswith("I ") and out[2:].lower() == text.lower()) or (
        out.startswith("I've been ") and out[10:] == text[5:])
    assert with_subject(out) == out  # once is enough


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["", "really ", "mostly ", "slowly ", "finally "]),
       st.sampled_from(["rehearsing", "knitting", "training", "volunteering", "renovating", "saving up"]),
       st.sampled_from([" for the spring concert", " at the harbour gym", " at the animal shelter", " with my cousin Ana"]))
def test_a_chat_s_been_before_what_the_speaker_does_is_put_back_as_i_have_been(adverb, verb, rest):
    """"Been rehearsing for the concert." leaves out "I've", as "Went to the market." leaves out "I":
    what follows is the speaker's ongoing doing, so the fact is theirs."""
    said = f"Been {adverb}{verb}{rest}."
    assert with_subject(said) == f"I've been {adverb}{verb}{rest}."
    assert read(with_subject(said)).about_speaker, said


@pytest.mark.parametrize("said", ["Been a long winter.", "Been crazy at work lately.", "Been a while!",
                                  "Been tough, but fine.", "Been there, done that.", "Been a busy week."])
def test_a_been_before_no_doing_is_left_as_said(said):
    """"Been a long winter", "Been crazy": the left-out subject is "it", the time, not the speaker."""
    assert with_subject(said) == said


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["Nah,", "Of course,", "In fact,", "For example,", "For instance,", "Of course"]),
       st.sampled_from(["I sold my old kayak to a neighbour in May.", "my sister runs the bakery on Rua Nova.",
                        "we could build a treehouse for the kids."]))
def test_a_discourse_marker_in_front_is_no_part_of_the_statement(marker, statement):
    """"In fact, I sold my kayak": the marker ties the sentence to the talk, the fact is what follows
    (and "For example, we could ..." is read as the suggestion it is)."""
    assert strip_opener(f"{marker} {statement}") == statement


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["I'm flying to a film festival", "I'm learning the cello", "I'm off to a chess tournament",
                        "I'm repainting the porch"]),
       st.sampled_from(["this month", "this weekend", "this summer", "these days", "this year"]))
def test_a_time_phrase_is_no_reference_to_something_said_before(statement, time):
    """"this month" says when, it leans on nothing said before: the `vague` rule is about "it",
    "this" and "these" standing for a thing named elsewhere."""
    sentence = f"{statement} {time}."
    assert read(sentence).about_speaker, sentence


_LEMMAS = None


def _verb_lemmas() -> list[str]:
    global _LEMMAS
    if _LEMMAS is None:
        from memory_app.consolidation.extractors.speech import _ADVERBS, _verbs
        # Not the verbs that are also the adverbs the reader takes between "I" and its verb
        # ("still", "even"): "I still the garden" is read as an adverb with no verb, by design.
        _LEMMAS = sorted(w for w in _verbs()[0] if w.isalpha() and w.islower() and is_base_verb(w)
                         and w not in _ADVERBS)
    return _LEMMAS


def _past(lemma: str) -> str:
    """A regular past form: "check" → "checked", "dry" → "dried", "bake" → "baked"."""
    if lemma.endswith("e"):
        return lemma + "d"
    if re.search(r"[^aeiou]y$", lemma):
        return lemma[:-1] + "ied"
    return lemma + "ed"


_FRONT = st.sampled_from("power double dry hand test spot deep fact cross spring speed pan baby".split())


@settings(max_examples=150, deadline=None)
@given(st.data(), _FRONT, st.sampled_from(["the router", "my settings", "a car", "our hub"]))
def test_a_two_word_verb_in_the_past_is_left_as_said(data, front, rest):
    """"I power cycled the router" → "Rosa power cycled the router", never "powers cycled": the
    tense is in the second word, so the first takes no -s."""
    verb = data.draw(st.sampled_from(_verb_lemmas()).map(_past).filter(lambda w: not is_base_verb(w)))
    out = third_person(f"I {front} {verb} {rest}.", name="Rosa")
    assert out.startswith(f"Rosa {front} {verb} "), out


@settings(max_examples=150, deadline=None)
@given(st.data(), _FRONT)
def test_a_hyphenated_verb_agrees_in_its_last_part(data, front):
    """"I power-cycle the router" → "Rosa power-cycles the router"; "power-cycled" stays."""
    verb = data.draw(st.sampled_from(_verb_lemmas()))
    assert third_person(f"I {front}-{verb} the router.", name="Rosa").startswith(
        f"Rosa {front}-{third_singular(verb)} the router")
    past = _past(verb)
    if not is_base_verb(past):
        assert third_person(f"I {front}-{past} the router.", name="Rosa").startswith(f"Rosa {front}-{past} the")


@settings(max_examples=100, deadline=None)
@given(st.data(), st.sampled_from(["", " really", " no longer", " kind of", " still", " pretty much", " usually"]))
def test_a_present_verb_agrees_after_any_adverb(data, adverb):
    """"I no longer drink coffee" → "Rosa no longer drinks coffee"."""
    verb = data.draw(st.sampled_from(_verb_lemmas()))
    assert third_person(f"I{adverb} {verb} the garden.", name="Rosa").startswith(
        f"Rosa{adverb} {third_singular(verb)} the garden")


def test_a_verb_taking_a_participle_still_agrees():
    assert third_person("I get paid a lot for night shifts.", name="Rosa") == "Rosa gets paid a lot for night shifts."
    assert third_person("I love baked goods.", name="Rosa") == "Rosa loves baked goods."
    assert third_person("I think I love it.", name="Rosa") == "Rosa thinks Rosa loves it."


def test_min_anchors_counts_the_things_a_sentence_names():
    assert read("I repaired the bike.", rules=LOOSE).about_speaker
    assert read("I repaired the bike.", rules=replace(LOOSE, min_anchors=2)).why == "no_anchor"
    assert read("I repaired the bike with my brother.", rules=replace(LOOSE, min_anchors=2)).about_speaker
    assert read("I repaired the bike.").why == "few_words"  # the default wants three content words


def test_anchors_are_names_numbers_dates_and_nouns_of_things():
    assert anchors("I moved to Porto in 2021 with my cat.") == ["Porto", "2021", "cat"]
    assert anchors("Rosa and I went to the market.", ignore=frozenset({"Rosa"})) == ["market"]
    assert anchors("I gave a speech.") == ["speech"]
    assert anchors("I gave a speech.", strict=True) == []  # an act of speech is no thing
    assert anchors("I feel so much better now.") == []


def test_the_listener_is_cut_off_the_sentence():
    assert own_part("I've taken up cycling to work - how about you?") == "I've taken up cycling to work."
    assert own_part("I found a bakery that you would like.") == "I found a bakery."
    assert own_part("I found a new bakery.") == "I found a new bakery."
    assert strip_vocative("I finally fixed the fence, Tomas.", names=frozenset({"Tomas"})) == "I finally fixed the fence."
    assert strip_vocative("I visited Porto, Lisbon.", names=frozenset({"Tomas"})) == "I visited Porto, Lisbon."
    # Found by the two-turn property in test_rules.py: the thanks to the listener stayed in the fact.
    assert strip_vocative("I joined a choir, thanks Tomas.", names=frozenset({"Tomas"})) == "I joined a choir."
    assert strip_vocative("I joined a choir, thank you!", names=frozenset({"Tomas"})) == "I joined a choir!"
    assert strip_vocative("I joined a choir, thanks Tomas, I moved in May.", names=frozenset({"Tomas"})) == (
        "I joined a choir, I moved in May.")


def test_the_speaker_as_subject_after_leading_phrases():
    assert speaker_subject("Yesterday, I bought a kayak.")
    assert speaker_subject("Me and my sister bought a kayak.")
    assert speaker_subject("My sister bought a kayak.")
    assert not speaker_subject("Buying a kayak was my best idea.")


def test_imperatives_are_read_from_the_verb_counts():
    assert is_imperative("Come over for dinner sometime.")
    assert not is_imperative("Dinner with my parents was lovely.")


def test_the_lexicon_reads_wordnet():
    lex = lexicon()
    assert lex.lemma("stopped", "v") == "stop" and lex.lemma("children", "n") == "child"
    assert lex.is_concrete_noun("guitar") and lex.is_concrete_noun("daughter")
    assert not lex.is_concrete_noun("happiness")
    assert lex.mostly_verb("keep") and not lex.mostly_verb("table")


def test_anaphoric_sentences_continue_the_previous_statement():
    assert read("It's my pride and joy.").follow_up


def test_turns_split_into_speaker_and_sentences():
    assert split_speaker("Rosa: I moved.") == ("Rosa", "I moved.")
    assert split_speaker("Note: call me") == (None, "Note: call me")
    assert sentences("Yeah, I built that! It's my pride and joy. [shares a photo of a shelf]") == [
        "Yeah, I built that!", "It's my pride and joy."]
    assert strip_opener("Wow, Rosa! I did it.") == "I did it."
    # The listener's name after an opener is a capitalised word, never a pronoun ("Yes, she ...").
    assert strip_opener("Yes, she still works at the docks.") == "she still works at the docks."
    assert sentences("My dentist is Dr. Moura. Prof. Hale sent me. I met J. Smith there.") == [
        "My dentist is Dr. Moura.", "Prof. Hale sent me.", "I met J. Smith there."]


# Each kind of junk the extractor meets in chat, as a class: a sentence of the kind, however its
# other words read, is no statement about the speaker. The words are ours (no benchmark text).
_ANY_WORDS = st.lists(st.sampled_from("my garden in Leith the new bike our dog Pepper last May I moved to a "
                                      "flat near the harbour with sister choir work".split()), max_size=12).map(" ".join)
REACTIONS = replace(StatementRules(), reactions=True)


@pytest.mark.parametrize("sentence, why", [
    ("Since we last spoke, a lot of things have happened in my life.", "few_words"),  # greeting
    ("We haven't chatted in ages about the allotment.", "greeting"),
    ("It's been ages, I finally got my old bike back from the shop.", ""),  # the fact after the greeting stays
    ("I haven't talked to my brother Luis about the bike in May.", ""),  # a fact, not the chat itself
    ("So sorry about missing the quiz night, my laptop died on me.", "sympathy"),
    ("Work has been rough on the allotment for me too.", "sympathy"),  # "me too": an answer to the listener
    ("I can imagine how hard the move to Leith was.", "sympathy"),
    ("Seeing my nephew graduate in Porto made me so proud.", "reaction"),  # a momentary reaction
    ("Watching the regatta from my balcony was the best.", "reaction"),
    ("The smell of pine reminds me of my grandmother's kitchen in Braga.", "reaction"),
    ("Sorry, I meant I moved to Leeds in May.", ""),  # a correction, not an apology
])
def test_each_kind_of_junk_is_read_as_its_kind(sentence, why):
    reading = read(plain(strip_opener(sentence)), rules=REACTIONS)
    assert (reading.about_speaker, reading.why) == (not why, why), reading


@settings(max_examples=200, deadline=None)
@given(_ANY_WORDS, st.sampled_from(["So sorry about", "I'm really sorry to hear", "I can imagine", "That must be"]),
       st.sampled_from(["", " for me too", " for me as well", ". Me too"]))
def test_sympathy_is_never_a_fact_whatever_it_names(words, front, back):
    for sentence in sentences(f"{front} {words}{back}."):
        reading = read(plain(strip_opener(sentence)))
        assert not reading.about_speaker, (sentence, reading)


@settings(max_examples=200, deadline=None)
@given(_ANY_WORDS, st.sampled_from(["Seeing", "Watching", "Hearing", "Knowing"]),
       st.sampled_from(["was the best", "made me cry", "made me think of my garden", "really moved me"]))
def test_a_reaction_is_never_a_fact_when_reactions_are_dropped(words, front, back):
    reading = read(plain(f"{front} {words} {back}."), rules=REACTIONS)
    assert not reading.about_speaker, reading


FEELING_RULES = replace(StatementRules(), feelings=2)


@settings(max_examples=200, deadline=None)
@given(_ANY_WORDS, st.sampled_from(["I'm", "I am", "I was", "I've been", "I feel", "The move was hard, but I'm"]),
       st.sampled_from(["", " so", " really", " truly", " super"]),
       st.sampled_from(["grateful for", "excited about", "thrilled about", "thankful for", "looking forward to",
                        "proud of", "determined to finish", "over the moon about", "inspired by", "embarrassed about"]))
def test_a_momentary_feeling_is_never_a_fact_whatever_it_names(words, front, adverb, feeling):
    """"I'm so grateful for my choir" says how the speaker feels at the moment: dropped when feelings
    are (``feelings`` 2), whatever it names after the feeling."""
    reading = read(plain(f"{front}{adverb} {feeling} {words} in Leith."), rules=FEELING_RULES)
    assert not reading.about_speaker, reading


# The junk classes the default rules (``feelings`` 1) kept in hand-labelled sample "f", each as a
# class: whatever the sentence names around the class's words, it is no fact. Our own words.
_THING = st.lists(st.sampled_from("the allotment my new bike our flat in Leith the choir my sister Ana the bakery "
                                  "a pottery class the harbour market my thesis".split()), min_size=1, max_size=6
                  ).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["has been tough", "was really hard", "can be tricky sometimes", "has been a bit rough",
                                "is a struggle"]),
       st.sampled_from(["I'm determined to finish", "I'm staying positive about", "I'm gonna make it with",
                        "I'm sure it'll work out with", "their help means the world to me with"]),
       _THING)
def test_coping_after_a_hardship_is_never_a_fact(before, hardship, coping, after):
    """"Moving has been tough, but I'm determined to ...": how things stand and how the speaker holds up."""
    reading = read(plain(f"{before.capitalize()} {hardship}, but {coping} {after}."))
    assert not reading.about_speaker, reading


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I'm staying positive about", "I keep pushing on through", "It keeps me going through",
                                "I'm trying to stay motivated with", "I'm hanging in there with"]))
def test_holding_up_is_never_a_fact_whatever_it_names(thing, front):
    reading = read(plain(f"{front} {thing}."))
    assert not reading.about_speaker, reading


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I've been rather frustrated lately with", "I'm so stressed right now about",
                                "I was upset today about"]))
def test_a_feeling_of_the_moment_is_never_a_fact(thing, front):
    assert not read(plain(f"{front} {thing}.")).about_speaker
    assert not read(plain(f"My mood is terrible now, {thing} broke.")).about_speaker
    assert not read(plain(f"{thing.capitalize()} keeps giving us a hard time.")).about_speaker


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I'm so excited to", "I'm thrilled to", "Can't wait to", "I'm looking forward to"]),
       st.sampled_from(["meet", "see", "learn about", "share", "try"]))
def test_looking_ahead_to_an_experience_is_a_feeling(thing, front, verb):
    """"I'm so excited to meet ...": the infinitive is what the feeling looks ahead to, not a plan."""
    assert not read(plain(f"{front} {verb} {thing}.")).about_speaker


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["Maybe I can", "Perhaps we could", "Maybe I could"]),
       st.sampled_from(["lend a hand with", "help out with", "offer some tips on"]))
def test_an_offer_is_never_a_fact(thing, front, verb):
    reading = read(plain(f"{front} {verb} the garden shed and {thing}."))
    assert reading.why == "hypothetical", reading


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["Thanks for helping me with", "Thank you for encouraging me to try",
                                "Still following my plans for", "Just fixing my"]))
def test_a_thanks_or_an_act_without_its_subject_is_a_fragment(thing, front):
    # A thanks keeps its "Thanks"/"Thank you" now (no clause is left without it): a fragment, or said to "you".
    assert read(plain(strip_opener(f"{front} the garden shed and {thing}."))).why in ("fragment", "address")


@settings(max_examples=150, deadline=None)
@given(_THING)
def test_showing_after_but_or_and_is_still_showing(thing):
    assert read(plain(f"The soup at {thing} was great, but check out what I baked after."),
                rules=replace(StatementRules(), showing=True)).why == "showing"


@pytest.mark.parametrize("text, family", [
    ("We raised money for a children's hospital with my gaming pals.", False),
    ("We all played for the kids' hospital in Leith.", False),  # a kind of place, not kin
    ("We volunteer with kids who need a home.", False),
    ("We took the kids to the harbour market.", True),
    ("My kids' school is in Leith.", True),
    ("Our children love the choir.", True),
    ("My husband and I moved in May.", True),
])
def test_children_are_family_only_when_someones(text, family):
    assert family_context(text) is family


@pytest.mark.parametrize("sentence", [
    "I'm looking into nursing jobs in Leeds.",  # looking for, into: something done, not a feeling
    "I'm trying to eat more vegetables at dinner.",
    "I'm keen on gardening and growing leeks.",
    "I bought a paper planner in March to stay on track at the bakery.",  # a purpose, not holding up
    "I'm lucky to have my sister Ana and our dog Pepper.",  # who they have is the statement
])
def test_what_only_looks_like_a_feeling_stays(sentence):
    assert read(sentence, rules=FEELING_RULES).about_speaker


@pytest.mark.parametrize("sentence", [
    "Still, I moved to Leeds in May.",  # "still" as a discourse word, with its subject
    "Still enjoying my garden at night, although I work late at the bakery.",  # more than the fragment
    "I'm thrilled to make a home for two rescue dogs in Leith.",  # a plan, not an experience looked ahead to
    "I'm looking forward to expanding my family with my wife Priya.",
    "I'll check out career options at the fair in June, and then the bakery.",
])
def test_what_only_looks_like_the_new_classes_stays(sentence):
    assert read(plain(sentence), rules=replace(StatementRules(), modal=0)).about_speaker


@settings(max_examples=200, deadline=None)
@given(_ANY_WORDS)
def test_a_question_or_a_word_to_the_listener_is_never_a_fact(words):
    assert not read(f"{words}?").about_speaker
    assert not read(f"I told you about {words}.").about_speaker
    assert not read(f"{words}, how about you.").about_speaker


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("oh wow yeah haha totally so really just great nice cool thanks lol awesome amazing "
                                "love it that this glad sure I am so it was fun".split()), min_size=1, max_size=10))
def test_filler_and_greetings_are_never_a_fact(words):
    for text in (" ".join(words) + "!", "Hey! Good to hear from you, " + " ".join(words) + ".",
                 "Long time no see, " + " ".join(words) + "."):
        for sentence in sentences(text):
            assert not read(plain(strip_opener(sentence))).about_speaker, sentence


def test_plain_drops_the_chats_markers_and_keeps_what_is_said():
    assert plain("Speaking of which, since we last spoke I've joined a choir \U0001F3B6") == "I've joined a choir"
    assert plain("Speaking of gardens, I planted leeks in May.") == "I planted leeks in May."
    assert plain("Though, I have been a bit tired lately.") == "I have been a bit tired lately."
    assert plain("Though I lost the final, I won a prize.") == "Though I lost the final, I won a prize."
    assert plain("I've finished my thesis since we last talked.") == "I've finished my thesis."
    assert plain("It's been a while! I adopted a cat in June.") == "I adopted a cat in June."
    assert plain("ß") == "ß"  # found by the property below: "ß".upper() is "SS"
    assert plain("0\U0001F02C0") == "0 0"  # found by the property below: an emoji between words joined them
    assert plain("0\u2776") == "0\u2776"  # found by the property below: a circled digit is a word's, not an emoji


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "So")), max_size=120))
def test_plain_only_takes_words_away_and_is_idempotent(text):
    out = plain(text)
    assert plain(out) == out
    words, kept = re.findall(r"[\w']+", text.lower()), re.findall(r"[\w']+", out.lower())
    it = iter(words)
    assert all(word in it for word in kept), (text, out)  # a subsequence of the input's words


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.sampled_from([StatementRules(), StatementRules(subject=True, feelings=2, modal=2,
                                                                                  strict_nouns=True, min_anchors=2),
                                                 StatementRules(others=2, showing=True, alone=True)]),
       st.booleans(), st.booleans())
def test_reading_any_text_never_raises_and_gives_one_answer(text, rules, alone, family):
    first = [read(strip_opener(s), rules=rules, alone=alone, family=family) for s in sentences(text)]
    assert first == [read(strip_opener(s), rules=rules, alone=alone, family=family) for s in sentences(text)]
    for s in sentences(text):
        assert isinstance(third_person(s, name="Rosa"), str)
        assert isinstance(own_part(s), str)


def _dev_directory() -> Path | None:
    for candidate in (os.environ.get("ENGRAM_LOCOMO_DEV"), REPO.parent / "shared" / "data" / "locomo-dev"):
        if candidate and (Path(candidate) / "26.json").exists():
            return Path(candidate)
    return None


def _runs(text: str, n: int = 6) -> set[str]:
    words = re.findall(r"[a-z0-9']+", text.lower().replace("’", "'"))
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


@pytest.mark.skipif(_dev_directory() is None, reason="LoCoMo dev conversations not found (set ENGRAM_LOCOMO_DEV)")
def test_no_locomo_text_is_in_the_consolidation_code_tests_or_docs():
    seen: set[str] = set()
    for name in ("26", "30", "47", "49"):
        for text in _strings(json.loads((_dev_directory() / f"{name}.json").read_text(encoding="utf-8"))):
            seen |= _runs(text)
    ours = [*sorted((REPO / "memory_app" / "consolidation").rglob("*.py")),
            *sorted((REPO / "tests" / "consolidation").rglob("*.py")),
            REPO / "engram_eval" / "consolidation_locomo.py", REPO / "engram_eval" / "statement_cv.py",
            REPO / "engram_eval" / "durable_cv.py", REPO / "tests" / "engram_eval" / "test_durable_cv.py",
            REPO / "engram_eval" / "corpora" / "statements.json", REPO / "docs" / "consolidation.md"]
    copied = {str(p.relative_to(REPO)): sorted(_runs(p.read_text(encoding="utf-8")) & seen)
              for p in ours if p.exists()}
    assert copied == {name: [] for name in copied}


# Issue 68's seventh pass: an opener is taken off only when what is left is still a clause.
_OPENER_WORDS = st.sampled_from(["So", "Well", "Oh", "Also", "Right", "Great", "Thanks", "Wow", "Yeah", "Actually"])
_CLAUSE_FRONT = st.sampled_from(["I", "I've", "we", "my", "our", "the", "she", "Rosa"])
_NO_CLAUSE_FRONT = st.sampled_from(["far", "done", "to", "much", "for", "good", "enough", "very"])


@settings(max_examples=200, deadline=None)
@given(_OPENER_WORDS.filter(lambda w: w not in ("Also",)), _NO_CLAUSE_FRONT, _THING)
def test_an_opener_stays_when_what_is_left_is_no_clause(opener, front, thing):
    """"So far, so good": "far, so good" is no clause, so "So" is part of what is said."""
    sentence = f"{opener} {front} {thing}."
    out = strip_opener(sentence)
    assert out == sentence or not out.lower().startswith(front + " "), out


@settings(max_examples=200, deadline=None)
@given(_OPENER_WORDS, st.sampled_from([",", "!", ", Tomas,"]), _CLAUSE_FRONT, _THING)
def test_an_opener_goes_when_a_clause_is_left(opener, mark, front, thing):
    out = strip_opener(f"{opener}{mark} {front} moved {thing}.")
    assert out == f"{front} moved {thing}.", out


@pytest.mark.parametrize("sentence, stripped", [
    ("So far, so good - the new job suits me.", "So far, so good - the new job suits me."),
    ("Thanks for asking, they're fine - we got another cat.", "they're fine - we got another cat."),
    ("Thank you so much for the lift! I got home at 9.", "I got home at 9."),
    ("Oh wow, Tomas! I finally finished the shed.", "I finally finished the shed."),
])
def test_strip_opener_examples(sentence, stripped):
    assert strip_opener(sentence) == stripped


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["really", "definitely", "just", "still", "honestly"]),
       st.sampled_from([("don't", "doesn't"), ("haven't", "hasn't"), ("do not", "does not"), ("have not", "has not")]))
def test_the_auxiliary_after_adverbs_agrees_with_the_speaker(adverb, forms):
    """"I definitely don't underestimate it" → "Rosa definitely doesn't ...", never "dons't"."""
    mine, theirs = forms
    assert third_person(f"I {adverb} {mine} like the harbour pub.", name="Rosa") == \
        f"Rosa {adverb} {theirs} like the harbour pub."


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["I had to apologize to", "I told", "I said sorry to", "I promised", "I recommended the bakery to",
                        "I've told"]),
       st.sampled_from(["my landlord in Leith", "my sister Ana", "the choir leader", "my boss at the harbour office"]))
def test_what_was_said_before_is_an_event_not_a_stance(front, who):
    """"I agree", "I bet" take a stance in the exchange; "I had to apologise to my flatmate", "I told my
    boss" tell of something done, which stays."""
    assert read(plain(f"{front} {who} about the flood last week.")).about_speaker
    assert read(plain("I agree with the plan for the choir trip.")).why == "stance"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["I used to run IT for", "I look after the IT at", "I moved into IT support at"]),
       st.sampled_from(["the harbour school", "Leith Library", "my sister's bakery"]), st.sampled_from([1, 2]))
def test_it_in_capitals_is_the_trade_not_a_pronoun(front, place, vague):
    """"I used to run IT for the school": "IT" leans on nothing said before (``vague`` 2 dropped it)."""
    assert read(f"{front} {place} in Leith.", rules=replace(StatementRules(), vague=vague)).why != "vague"


# Issue 68's eighth pass: the junk classes hand-labelled sample "h" still kept, each as a class.
# Our own words; whatever the sentence names around the class's words, it is no fact.
@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I'm so grateful for", "I'm truly thankful for", "I feel really blessed for",
                                "I'm deeply thankful for the chance to help", "I'm so grateful for the support of"]))
def test_gratitude_for_something_is_a_feeling_whatever_it_names(thing, front):
    """"I'm so grateful for my choir's support": the thing named is what the feeling is about; the
    sentence says how the speaker feels, nothing durable about them."""
    assert read(plain(f"{front} {thing} and the harbour choir.")).why == "feeling"


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I had a blast", "I had a great time", "I had so much fun", "I had a ball"]),
       st.sampled_from(["racing against", "singing with", "cooking for", "playing cards with"]))
def test_enjoying_an_activity_is_a_feeling_whatever_it_names(thing, front, doing):
    """"I had a blast racing against strong riders": how an activity felt, not what the speaker did."""
    assert read(plain(f"{front} {doing} {thing} and the harbour choir.")).why == "feeling"


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I'm determined to keep", "I'm committed to continue", "I'm set on continuing to",
                                "I'm determined to carry on"]),
       st.sampled_from(["helping out at", "making a change at", "doing good work for", "giving back to"]))
def test_resolve_to_keep_going_is_a_feeling_whatever_it_names(thing, front, doing):
    """"I'm determined to keep making a difference": resolve to go on names nothing new about the speaker."""
    assert read(plain(f"{front} {doing} {thing} and the harbour choir.")).why == "feeling"


@settings(max_examples=150, deadline=None)
@given(_THING, st.sampled_from(["I'm swamped with", "I'm having trouble with", "I'm struggling with",
                                "I've been snowed under with", "I had a rough day at", "I had a frustrating problem at",
                                "I've had rough times with", "I'm on my way back from"]))
def test_a_state_of_the_moment_is_never_a_fact_whatever_it_names(thing, front):
    """"I'm swamped with the kids and work": how things stand for the speaker now, not what stays true."""
    assert read(plain(f"{front} {thing} and the harbour choir.")).why == "momentary"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["Lately I got into", "I took up", "I finally tried", "I managed to get out to", "In addition, I tried",
                        "I collected", "I carved"]),
       st.sampled_from(["a new hobby", "a new pastime", "another country", "a good amount", "some new activity",
                        "a new project", "one"]),
       st.sampled_from(["", " lately", " again", " last month", " in the end"]))
def test_a_thing_left_unnamed_is_no_fact(front, unnamed, tail):
    """"Lately I got into a new pastime", "I built one": what the sentence is about is not named."""
    assert read(plain(f"{front} {unnamed}{tail}.")).why in ("no_anchor", "vague", "few_words")


@pytest.mark.parametrize("sentence", [
    "I took up a new hobby: bouldering at the Leith wall.",  # the hobby is named after all
    "I moved to another country, Portugal, in 2019.",
    "I adopted a puppy from the shelter in Leith.",  # a thing of its own, not a category
    "I'm grateful to have my sister Ana nearby in Leith.",  # who they have is the statement
    "I had a great time at my cousin's wedding in Porto in May.",  # a dated event of theirs
    "I'm struggling to learn Portuguese at night school.",  # what they do, not how things stand
])
def test_what_only_looks_like_the_eighth_pass_classes_stays(sentence):
    assert read(plain(sentence)).about_speaker, read(plain(sentence))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["Running", "Juggling", "Opening", "Sorting out", "Finishing"]),
       st.sampled_from(["bakery in Leith", "allotment and the choir", "flat by the harbour", "pottery studio"]),
       st.sampled_from(["is tricky at times", "is both scary and thrilling", "has had highs and lows", "was a big hurdle",
                        "has been tough"]),
       st.sampled_from(["", ", but worth it", ", yet so rewarding", " - but what a wild ride"]))
def test_how_an_undertaking_feels_is_no_fact_whatever_it_names(gerund, thing, appraisal, tail):
    """"Running the bakery is tricky at times, yet so rewarding": how something done feels, not what
    stays true of the speaker (the possessive makes it about them)."""
    reading = read(plain(f"{gerund} my {thing} {appraisal}{tail}."))
    assert reading.why == "feeling", reading


@pytest.mark.parametrize("sentence", [
    "Losing my job at the docks was tough, but it pushed me to open my own bakery in Leith.",
    "Painting helps me unwind after my shifts at the harbour office.",
])
def test_an_undertaking_with_more_said_after_it_stays(sentence):
    assert read(plain(sentence)).about_speaker, read(plain(sentence))


# Issue 68's ninth pass: the feelings sample "i" still kept, each as a class. Our own words.
@settings(max_examples=100, deadline=None)
@given(_THING, st.sampled_from(["Joining", "Finding", "Volunteering at", "Moving to", "Being part of"]),
       st.sampled_from(["has really meant a lot", "has meant so much", "means the world", "meant everything"]),
       st.sampled_from(["", " to me", " to us"]))
def test_what_an_undertaking_has_meant_is_a_feeling_whatever_it_names(thing, doing, meant, to):
    """"Joining the choir has meant so much to me": how much an undertaking meant, not a fact about the speaker."""
    assert not read(plain(f"{doing} {thing} {meant}{to}.")).about_speaker


@settings(max_examples=100, deadline=None)
@given(_THING, st.sampled_from(["I felt fulfilled", "I feel so fulfilled", "I was so proud", "I felt really alive",
                                "I'm so happy"]),
       st.sampled_from(["guiding", "cooking for", "singing with", "teaching"]))
def test_how_doing_something_felt_is_a_feeling_whatever_it_names(thing, front, doing):
    """"I felt fulfilled guiding them": how an activity felt, not what the speaker does."""
    assert read(plain(f"{front} {doing} {thing} and the harbour choir.")).why == "feeling"


@settings(max_examples=100, deadline=None)
@given(_THING, st.sampled_from(["I'm sure", "I'm really sure", "I'm confident", "I'm so sure that"]),
       st.sampled_from(["investing in", "sticking with", "my time at", "all the work on"]),
       st.sampled_from(["will pay off", "will work out", "is gonna be worth it", "will be fine"]))
def test_being_sure_it_will_work_out_is_a_feeling_whatever_it_names(thing, front, doing, outcome):
    """"I'm sure putting hours into the bakery will pay off": hope that things work out, no fact."""
    assert not read(plain(f"{front} {doing} {thing} {outcome}.")).about_speaker


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([("I drove somewhere quiet", "I drove to the coast"),
                        ("I've been planning a few", "I've been planning a few paintings"),
                        ("I've been organizing something", "I've been organizing a quiz night"),
                        ("Something big happened to me", "A burst pipe flooded my kitchen")]),
       st.sampled_from([" with my sister", " in July 2023", " on Friday", " after work"]))
def test_a_thing_left_unnamed_is_no_fact(unnamed, named):
    """"I drove somewhere quiet with my sister": what was done names no thing (a date or the people
    with whom do not name it); the same sentence naming its thing is a fact."""
    said, told = unnamed
    assert not read(f"{said}{named}.").about_speaker, said + named
    assert read(f"{told}{named}.").about_speaker, told + named


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["I play {}!", "I've played {} before.", "I play {} too.", "I'm into {} lately."]),
       st.sampled_from(["cello", "drums", "chess", "Settlers of Catan", "Kotlin"]))
def test_two_words_are_enough_when_one_is_the_speaker_s_named_thing(form, thing):
    """"I play cello!": two content words, and one is the instrument the speaker plays (or a name):
    short, but what someone would write down about them."""
    assume(not (thing[0].islower() and "into" in form))  # "I'm into chess": no verb of doing, no name
    assert read(form.format(thing)).about_speaker, form.format(thing)


@pytest.mark.parametrize("said", ["I agree, Tomas!", "I was born then.", "I had a setback.", "I'm so lucky."])
def test_two_words_naming_no_thing_of_the_speaker_s_stay_too_few(said):
    assert not read(said).about_speaker
    assert not read("I agreed, Tom!", ignore=frozenset({"Tomas", "Rosa"})).about_speaker  # the listener's short name


@pytest.mark.parametrize("said, kept", [("I can't believe how quickly this spring went by.", False),
                                        ("I couldn't believe how cold the lake was in May.", False),
                                        ("I believe in the harbour choir's fundraiser this year.", True)])
def test_disbelief_is_a_stance_in_the_exchange_not_a_fact(said, kept):
    """A time phrase is no reference ("this spring"), so "I can't believe how quickly this spring
    went" is read, and read as the amazement it is."""
    assert read(said).about_speaker is kept, read(said)


# Issue 68's twelfth pass: the junk classes sample "j" still kept. Our own words.
@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["Marrying", "Taking", "Going hiking with", "Cooking for", "Meeting"]),
       st.sampled_from(["my partner", "my kids to the harbour", "my dad in the Alps", "my sister Ana"]),
       st.sampled_from(["was the best part", "was great fun", "was really special for us", "was the highlight",
                        "was the best thing", "was so much fun, and really special for me"]))
def test_how_an_undertaking_was_is_a_feeling_whatever_it_names(doing, thing, appraisal):
    """"Marrying my partner was the best part": how something done felt, said as an appraisal of it."""
    assert not read(plain(f"{doing} {thing} {appraisal}.")).about_speaker, f"{doing} {thing} {appraisal}"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["", "Yeah, ", "Honestly, "]),
       st.sampled_from(["our health", "our lives", "our bodies", "our minds", "our dreams", "our choices"]),
       st.sampled_from(["can sour the best plans", "can change in a heartbeat", "shape who we become",
                        "need rest after the harbour run", "are worth fighting for"]))
def test_a_maxim_about_our_lives_is_no_fact(opener, ours, said):
    """"Our health can sour the best plans": everyone's health, not the speaker's household."""
    assert read(strip_opener(f"{opener}{ours[0].upper() if not opener else ours[0]}{ours[1:]} {said}.")).why in ("maxim", "no_anchor")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["I've learned that", "I've realized that", "I learned that", "Overall, I've learned that"]),
       st.sampled_from(["a bakery is no picnic", "running a bakery is hard work", "the harbour market never sleeps",
                        "patience pays off in pottery"]))
def test_a_lesson_about_the_world_is_a_maxim(front, lesson):
    """"I've learned that a bakery is no picnic": a general truth the speaker holds, not about them."""
    assert not read(strip_opener(f"{front} {lesson}.")).about_speaker


@pytest.mark.parametrize("sentence", [
    "I've learned that I love cooking Thai food for my sister.",  # about the speaker after all
    "Our kids love the beach at Porto.",  # a household's
    "My health has improved since I moved to Leith in 2021.",
])
def test_what_only_looks_like_a_maxim_about_our_lives_stays(sentence):
    assert read(sentence, family=True).about_speaker, read(sentence, family=True)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["Lately, I've been thinking about", "I've been thinking a lot about",
                        "Lately I've been wondering about", "Recently I've been reflecting on"]), _THING)
def test_thoughts_of_the_moment_are_no_fact_whatever_they_name(front, thing):
    """"Lately, I've been wondering about the move": what is on the speaker's mind now."""
    assert read(plain(f"{front} {thing} and the harbour choir.")).why == "momentary"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["I haven't got far with", "I haven't had much time for",
                        "I haven't been to"]), _THING, st.sampled_from([" lately", " recently", " these days"]))
def test_what_has_not_happened_lately_is_a_state_of_the_moment(front, thing, when):
    """"I haven't got far with my thesis lately": how things stand now, not what stays true."""
    assert read(plain(f"{front} {thing} and the harbour choir{when}.")).why == "momentary"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["Hopefully I'll get", "Hopefully, I will get", "Hopefully I can get", "Hopefully I get"]),
       st.sampled_from(["an appointment at the Leith clinic", "a spot in the harbour choir", "a table at the bakery"]),
       st.sampled_from(["", " soon", " next month"]))
def test_a_hope_is_no_fact(front, thing, when):
    """"Hopefully I'll get a slot at the clinic soon": a hope, not something that is so."""
    assert not read(plain(f"{front} {thing}{when}.")).about_speaker


@pytest.mark.parametrize("sentence, rewritten", [
    ("Me and my cousins rarely meet up.", "Rosa and Rosa's cousins rarely meet up."),
    ("Me and my sister Ana went to Porto in May.", "Rosa and Rosa's sister Ana went to Porto in May."),
])
def test_me_and_someone_is_the_speaker_and_them(sentence, rewritten):
    assert third_person(sentence, name="Rosa") == rewritten
