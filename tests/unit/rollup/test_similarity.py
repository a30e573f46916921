"""Text similarity: comparing two texts (overlap, role swaps, changed details) and the stored sketch."""

from __future__ import annotations

import dataclasses

import pytest

from dreamer.details import Detail
from dreamer.rollup.similarity import (
    Sketch,
    compare,
    covered_by,
    profile_text,
    says_outright,
    sketch_of,
    sketch_text,
    stance_topic,
)
from tests.labelled_pairs import FRIENDSHIP_ROLE_SWAP, LABELLED, SUBSUMED, TRILOGY_WATCHED, text_of, texts
from tests.locomo import sentence


class TestCompare:
    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ("Sam is grateful for Evan's support", "Evan appreciates Sam's support"),
            ("Evan invited Sam", "Sam invited Evan"),
            (
                "Caroline shared with Melanie that she applied",
                "Melanie shared with Caroline that she applied",
            ),
            ("The dog bit the man", "The man bit the dog"),
            ("Nate appreciates Joanna's support for his writing", "Nate supports Joanna's writing"),
        ],
    )
    def test_role_swaps_are_detected(self, first: str, second: str) -> None:
        """Same words, other roles (who did what to whom) is a changed detail."""
        assert Detail.ROLE in compare(profile_text(first), profile_text(second)).changed

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ("Sam plans a painting session with Evan", "Evan plans a painting session with Sam"),
            ("John and Maria discussed the schools", "Maria discussed the schools with John"),
            (
                "Maria offered to help John with his food drive",
                "John appreciated Maria's offer to help with his food drive",
            ),
            ("John received advice from James about chess", "James shared advice with John about chess"),
            ("Gina encouraged Jon to stay positive", "Jon was encouraged by Gina to stay positive"),
            (
                "Joanna watched the film on Nate's advice and enjoyed it",
                "Joanna watched the film on Nate's advice",
            ),
            ("Joanna appreciates Nate's support for her writing", "Nate supports Joanna's writing"),
            ("Jon finds Gina's encouragement motivating", "Gina encourages Jon to keep going"),
        ],
    )
    def test_one_event_told_from_two_sides_is_no_role_swap(self, first: str, second: str) -> None:
        """A joint event, the other voice, or the other side of one act keeps who acted: no role swap."""
        assert Detail.ROLE not in compare(profile_text(first), profile_text(second)).changed
        assert Detail.ROLE not in compare(profile_text(second), profile_text(first)).changed

    def test_role_swap_between_dataset_facts_is_detected(self) -> None:
        """Two people valuing their friendship, each the subject in turn (dataset facts), is a role swap."""
        first, second = texts(FRIENDSHIP_ROLE_SWAP)
        assert Detail.ROLE in compare(profile_text(first), profile_text(second)).changed

    def test_swapped_objects_are_a_role_swap(self) -> None:
        """Same subject, same words, objects swapped: "gave Ben's dog to Sam" / "gave Sam's dog to Ben"."""
        comparison = compare(
            profile_text("Evan gave Ben's dog to Sam."), profile_text("Evan gave Sam's dog to Ben.")
        )
        assert comparison.changed == (Detail.ROLE,)

    def test_coordinated_names_in_either_order_are_no_role_swap(self) -> None:
        """ "Nate and Joanna" and "Joanna and Nate" are the same subject (a dataset summary sentence)."""
        caught_up = sentence(("42", "session_1_summary", 0))
        swapped = caught_up.replace("Nate and Joanna", "Joanna and Nate")
        assert swapped != caught_up
        comparison = compare(profile_text(caught_up), profile_text(swapped))
        assert comparison.changed == ()
        assert comparison.same_subject

    def test_another_person_is_an_entity_change(self) -> None:
        """A name that only one text mentions is a changed entity (two dataset facts)."""
        comparison = compare(
            profile_text(sentence(("30", "session_6_observation", "Jon", 1))),
            profile_text(sentence(("30", "session_6_observation", "Gina", 0))),
        )
        assert comparison.changed == (Detail.ENTITY,)

    def test_capitalisation_alone_is_no_entity_change(self) -> None:
        """ "Trilogy" in one text and "trilogy" in the other is the same word (a dataset fact, recased)."""
        quoted = sentence(TRILOGY_WATCHED[1])
        plain = quoted.replace("'The Lord of the Rings' Trilogy", "the Lord of the Rings trilogy")
        assert plain != quoted
        assert compare(profile_text(plain), profile_text(quoted)).changed == ()

    def test_added_detail_is_told_apart_from_changed_detail(self) -> None:
        """A date only one text has is "added"; two different dates are a change of value."""
        added = compare(
            profile_text("Nate attended a convention on Friday."), profile_text("Nate attended a convention.")
        )
        changed = compare(
            profile_text("Nate attended a convention on Friday."),
            profile_text("Nate attended a convention on Sunday."),
        )
        assert added.changed == added.added == (Detail.DATE,)
        assert changed.changed == (Detail.DATE,)
        assert changed.added == ()

    def test_containment_is_measured_from_the_new_text(self) -> None:
        """Containment is the share of the new text's words found in the existing one."""
        short, long = (profile_text(text) for text in texts(SUBSUMED))
        assert compare(short, long).containment == 1.0
        assert compare(long, short).containment < 1.0


class TestNegationScope:
    def test_the_same_count_of_negations_on_other_words_is_a_changed_negation(self) -> None:
        """ "Sam does not like tea" / "Sam likes tea, not coffee": one negation each, another fact."""
        first, second = profile_text("Sam does not like tea."), profile_text("Sam likes tea, not coffee.")
        assert Detail.NEGATION in compare(first, second).changed
        assert covered_by(first, second) is None

    def test_a_negation_reworded_is_no_change(self) -> None:
        """ "doesn't" / "does not" before the same word negate the same thing."""
        first, second = profile_text("Sam doesn't drink coffee."), profile_text("Sam does not drink coffee.")
        assert Detail.NEGATION not in compare(first, second).changed


class TestCoveredBy:
    FULL = "Caroline attended an LGBTQ support group on 7 May and found the stories powerful."

    def test_the_share_of_the_part_the_whole_says(self) -> None:
        """A shorter telling is covered by the share of its content words the fuller one says."""
        whole = profile_text(self.FULL)
        assert covered_by(profile_text("Caroline attended an LGBTQ support group."), whole) == 1.0
        share = covered_by(profile_text("Caroline attended an LGBTQ support group with friends."), whole)
        assert share == pytest.approx(5 / 6)

    @pytest.mark.parametrize(
        "part",
        [
            "Caroline attended an LGBTQ support group on 9 May.",
            "Caroline attended an LGBTQ support group in 2021.",
            "Caroline never attended an LGBTQ support group.",
            "Melanie attended an LGBTQ support group.",
            "Caroline attended 2 LGBTQ support groups.",
        ],
    )
    def test_a_detail_the_whole_lacks_is_never_covered(self, part: str) -> None:
        """Another date, a year, a negation, a name or a number of the part's own: not covered."""
        assert covered_by(profile_text(part), profile_text(self.FULL)) is None

    def test_the_whole_may_add_details(self) -> None:
        """The fuller telling may hold a date (or a name) the shorter one does not mention."""
        assert covered_by(
            profile_text("Caroline found the support group stories powerful."), profile_text(self.FULL)
        )

    def test_the_whole_may_negate_what_the_part_does_not_say(self) -> None:
        """ "not stop dreaming" negates "stop", a word the part does not say: the fuller telling
        holds "Gina encourages Jon to keep going"; a negation of the part's own words never does."""
        whole = profile_text("Gina encouraged Jon to keep going and not stop dreaming.")
        assert covered_by(profile_text("Gina encourages Jon to keep going."), whole) == 1.0
        assert covered_by(profile_text("Gina encourages Jon to stop dreaming."), whole) is None
        assert covered_by(profile_text("Sam likes tea."), profile_text("Sam does not like tea.")) is None
        assert covered_by(profile_text("Sam likes tea."), profile_text("Sam likes tea, not coffee.")) == 1.0
        no_longer = profile_text("Nate no longer has a dog named Max that he walks.")
        assert covered_by(profile_text("Nate has a dog named Max that he walks."), no_longer) is None

    def test_a_negated_stance_word_is_the_stance_negated(self) -> None:
        """A stance family reads as one content word ("grateful"): "does not appreciate" still
        negates the part's "is grateful"."""
        whole = profile_text("Sam does not appreciate Evan's help with the garden.")
        assert covered_by(profile_text("Sam is grateful for Evan's help with the garden."), whole) is None

    def test_a_role_swap_is_never_covered(self) -> None:
        """Who did what to whom: "Sam is grateful for Evan's support" is not in "Evan is grateful ..."."""
        part = profile_text("Sam is grateful for Evan's support.")
        assert covered_by(part, profile_text("Evan is grateful for Sam's support and his help.")) is None

    def test_a_value_the_whole_holds_among_others_is_not_covered(self) -> None:
        """ "Nate has 2 turtles" is not covered by "Nate has 3 turtles and 2 dogs": the 2 counts dogs."""
        part = profile_text("Nate has 2 turtles.")
        assert covered_by(part, profile_text("Nate has 3 turtles and 2 dogs.")) is None
        assert covered_by(part, profile_text("Nate has 2 turtles and a dog.")) == 1.0

    def test_a_text_without_content_words_is_never_covered(self) -> None:
        """Nothing to say, nothing covered (no division by zero)."""
        assert covered_by(profile_text("She did it."), profile_text(self.FULL)) is None


class TestSaysOutright:
    @pytest.mark.parametrize(
        ("part", "whole"),
        [
            ("Melanie finds pottery relaxing", "Melanie finds pottery relaxing and creative."),
            ("Nate has 2 turtles", "Last year Nate has 2 turtles, he said."),
            ("Sam does not like tea", "Everyone knows Sam does not like tea."),
        ],
    )
    def test_a_run_of_the_whole_is_said(self, part: str, whole: str) -> None:
        """The part's words (or, without values and negations, its content words) as one run."""
        assert says_outright(profile_text(part), profile_text(whole))

    @pytest.mark.parametrize(
        ("part", "whole"),
        [
            ("Sam likes tea", "Evan likes tea and Sam likes coffee."),
            ("Sam does not like tea", "Sam likes tea, not coffee."),
            ("Nate has 2 turtles", "Nate has turtles: 2 of them."),
            ("", "Anything at all."),
        ],
    )
    def test_sharing_the_words_is_not_saying_it(self, part: str, whole: str) -> None:
        """All the words, in another order or bound elsewhere, or a value or negation outside the
        exact run, or no words at all: not said."""
        assert not says_outright(profile_text(part), profile_text(whole))


class TestSketch:
    def test_round_trip(self) -> None:
        """A dumped sketch loads back equal, protected-detail words kept apart from content words."""
        sketch = sketch_of(profile_text("On 8 May 2023, Grafana listens on port 3000 on host hermes-mon."))
        assert Sketch.loads(sketch.dumps()) == sketch
        assert "3000" in sketch.content and "3000" not in sketch.residual
        assert sketch.normalized == "grafana listens on port 3000 on host hermes mon"

    @pytest.mark.parametrize(
        "text", [None, "", "s0\ttext\ta b\ta", "s1\tonly two", "garbage", "s3\ta\tb\tc\td\te\tf"], ids=repr
    )
    def test_missing_or_foreign_sketch_reads_as_none(self, text: str | None) -> None:
        """A missing, malformed or other-version sketch is None, so the card is sketched again."""
        assert Sketch.loads(text) is None

    def test_a_sketch_keeping_its_sentences_round_trips_and_compares_as_the_card_s(self) -> None:
        """The sentences' sketches ride along as a fifth field, as stored; two sketches of one text
        are equal whether they keep them or not (the judge compares the card's own words)."""
        plain = sketch_of(profile_text("Grafana listens on port 3000. It runs on host hermes-mon."))
        kept = dataclasses.replace(plain, parts="stored\x1eparts")
        again = Sketch.loads(kept.dumps())
        assert again == kept == plain and again is not None and again.parts == "stored\x1eparts"
        assert Sketch.loads(plain.dumps()) is not None and Sketch.loads(plain.dumps()).parts is None  # type: ignore[union-attr]

    def test_empty_word_sets_survive(self) -> None:
        """A card whose words are all stopwords or protected values keeps empty sets, not ['']."""
        sketch = sketch_of(profile_text("On 3 May at 10:00."))
        again = Sketch.loads(sketch.dumps())
        assert again == sketch and "" not in again.residual


#: Texts whose values are cut out of words, or whose date clause, names and negations are the point.
AWKWARD_TEXTS = [
    "",
    " ",
    "On 8 May 2023.",
    "On 3 May at 10:00, Sam did not move the NAS to https://Example.com/Backups/v2.1?x=3.",
    "Alice and Bob met Carol in Paris; Dave never came.",
    "The build at /srv/App-2/v3.0.1-rc2 costs -$5.50 (about -3%) on C++ and C# @alice's box.",
    "x" * 2_000,
    "日本語 テキスト 2023年5月8日 Ünïcödé 𝒮am",
    "v2beta3 runs on 10.0.0.12:8080 since 2023-05-08T10:00Z, not 2022.",
    "Two turtles and 2 turtles; twenty-one, 21st, 1st of May.",
]


class TestSketchWithoutTheFullAnalysis:
    @pytest.mark.parametrize("text", AWKWARD_TEXTS, ids=range(len(AWKWARD_TEXTS)))
    def test_equals_the_sketch_of_the_full_analysis(self, text: str) -> None:
        """The cheap sketch is the full analysis' sketch, whatever the text's values and names."""
        assert sketch_text(text) == sketch_of(profile_text.__wrapped__(text))  # type: ignore[attr-defined]

    def test_equals_it_on_every_labelled_sentence(self) -> None:
        """On the LoCoMo sentences of the labelled pairs, and on each of their sentences alone."""
        from dreamer.rollup.cards import sentences

        seen = {text_of(source) for pair in LABELLED for source in (pair.first, pair.second)}
        seen |= {part for text in list(seen) for part in sentences(text)}
        unequal = [
            t
            for t in sorted(seen)
            if sketch_text(t) != sketch_of(profile_text.__wrapped__(t))  # type: ignore[attr-defined]
        ]
        assert not unequal and len(seen) > 400


class TestStanceTopic:
    def test_what_a_stance_is_about_without_its_names_and_stance(self) -> None:
        """Names (stemmed as the content words are) and the stance families are left out."""
        topic = stance_topic(profile_text("Caroline expresses appreciation for her friendship with Melanie."))
        assert topic == {"friendship"}
        assert stance_topic(profile_text("Sam appreciates Evan.")) == frozenset()
