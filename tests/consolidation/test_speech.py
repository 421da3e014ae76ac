"""Reading a conversation turn as statements about its speaker (pure functions)."""

from __future__ import annotations

import pytest

from memory_app.consolidation.extractors.speech import (
    is_base_verb,
    read,
    sentences,
    split_speaker,
    strip_opener,
    third_person,
    third_singular,
)


@pytest.mark.parametrize("sentence, rewritten", [
    ("I love painting landscapes.", "Melanie loves painting landscapes."),
    ("I really try to go every week.", "Melanie really tries to go every week."),
    ("I painted that lake sunrise last year!", "Melanie painted that lake sunrise last year!"),
    ("I went camping with my kids.", "Melanie went camping with Melanie's kids."),
    ("I'm swamped with work.", "Melanie is swamped with work."),
    ("I've been painting for years.", "Melanie has been painting for years."),
    ("I don't like jazz.", "Melanie doesn't like jazz."),
    ("I read a book last week.", "Melanie read a book last week."),
    ("I wanna open a studio.", "Melanie wants to open a studio."),
])
def test_first_person_becomes_third_person_about_the_speaker(sentence, rewritten):
    assert third_person(sentence, name="Melanie") == rewritten


def test_we_is_the_speaker_with_others_or_family():
    assert third_person("We went camping.", name="Jon") == "Jon and others went camping."
    assert third_person("We went camping.", name="Jon", family=True) == "Jon and family went camping."


def test_verb_forms_come_from_wordnet():
    assert is_base_verb("love") and is_base_verb("go") and is_base_verb("need")
    assert not is_base_verb("went") and not is_base_verb("painted") and not is_base_verb("could")
    assert not is_base_verb("read", past_context=True) and is_base_verb("read")
    assert [third_singular(v) for v in ("go", "try", "have", "watch", "play")] == [
        "goes", "tries", "has", "watches", "plays"]


@pytest.mark.parametrize("sentence, about_speaker", [
    ("I went to a LGBTQ support group yesterday.", True),
    ("I'm keen on counseling or working in mental health.", True),
    ("Did you hear any inspiring stories?", False),  # a question
    ("You'd be a great counselor!", False),  # about the listener
    ("I love that!", False),  # a reaction, nothing stated
    ("The colors really blend nicely.", False),  # not about the speaker
    ("My left knee hurts after long runs.", True),  # a sentence starts with a capital
    ("Our dog sleeps in the garden shed.", True),
    ("The US open starts next week.", False),  # "US" is not "us"
])
def test_what_counts_as_a_statement_about_the_speaker(sentence, about_speaker):
    assert read(sentence).about_speaker is about_speaker


def test_anaphoric_sentences_continue_the_previous_statement():
    assert read("It's special to me.").follow_up


def test_turns_split_into_speaker_and_sentences():
    assert split_speaker("Caroline: I moved.") == ("Caroline", "I moved.")
    assert split_speaker("Note: call me") == (None, "Note: call me")
    assert sentences("Yeah, I painted that! It's special to me. [shares a photo of a lake]") == [
        "Yeah, I painted that!", "It's special to me."]
    assert strip_opener("Wow, Caroline! I did it.") == "I did it."
    assert sentences("My dentist is Dr. Moura. Prof. Hale sent me. I met J. Smith there.") == [
        "My dentist is Dr. Moura.", "Prof. Hale sent me.", "I met J. Smith there."]
