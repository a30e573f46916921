"""Who did what to whom: the doer of an act told from each side, a pronoun's act, a mutual stance."""

from __future__ import annotations

import pytest

from dreamer.rollup.roles import role_swapped, same_doer
from dreamer.rollup.similarity import covered_by, profile_text
from tests.labelled_pairs import FRIENDSHIP_ROLE_SWAP, texts

#: A stored card of the dev conversations: Melanie's stance, then the two of them together.
MUTUAL = (
    "Melanie values friendship with Caroline and expresses appreciation for it. "
    "They express appreciation for each other's friendship and support."
)


def swapped(first: str, second: str) -> bool:
    """Whether either order reads a role swap (the dedup compares both ways)."""
    return role_swapped(profile_text(first), profile_text(second)) or role_swapped(
        profile_text(second), profile_text(first)
    )


class TestSameDoer:
    @pytest.mark.parametrize(
        ("first", "second", "same"),
        [
            (
                "Joanna appreciates Nate's support for her writing",
                "Nate is supportive of Joanna's writing",
                True,
            ),
            ("Jon finds Gina's encouragement motivating", "Gina encourages Jon to keep going", True),
            ("Gina encourages Jon to keep going", "Gina encouraged Jon to dance", True),
            (
                "Nate appreciates Joanna's support for his writing",
                "Nate is supportive of Joanna's writing",
                False,
            ),
            ("Maria offered to help John", "John offered to help Maria", False),
            ("Joanna appreciates Nate's support", "Joanna appreciates Tim's support", False),
            ("Joanna appreciates the support", "Joanna values the support", False),
        ],
    )
    def test_same_doer_of_one_act_told_from_each_side(self, first: str, second: str, same: bool) -> None:
        """Two people named in both and the same one of them acting in both, in either order; a
        swap, a third person or a single name is never the same doer."""
        assert same_doer(profile_text(first), profile_text(second)) is same
        assert same_doer(profile_text(second), profile_text(first)) is same


class TestActHeldByAPronoun:
    def test_the_pronoun_is_the_doer_the_other_text_names(self) -> None:
        """ "... on his recommendation" / "... on Nate's recommendation" (a dev-conversation pair):
        one act by Nate, told by Joanna both times; no swap, the same doer, and the fuller card says
        the shorter one."""
        told = (
            "Joanna told Nate she enjoyed watching the Lord of the Rings trilogy on his recommendation, "
            "and Nate agreed it's a great trilogy."
        )
        watched = "Joanna watches the Lord of the Rings trilogy based on Nate's recommendation and enjoys it."
        assert not swapped(told, watched)
        assert same_doer(profile_text(watched), profile_text(told))
        assert covered_by(profile_text(watched), profile_text(told)) is not None

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            # The other text names no doer: the subject acts in both, as before.
            ("Sam thanked Evan for his help", "Evan helped Sam move house"),
            # Each is the subject of a stance of their own; the pronoun changes nothing.
            ("Sam thanked Evan for his help", "Evan thanked Sam for his help"),
            # The pronoun is not after "on" or "for": "her offer" is most often the subject's own.
            ("Maria told John about her offer to help", "Maria appreciated John's offer to help"),
        ],
    )
    def test_a_swap_stays_a_swap(self, first: str, second: str) -> None:
        """Where the pronoun cannot be read as the other text's doer, who acts is read as before."""
        assert swapped(first, second)

    def test_the_pronoun_is_never_read_as_this_texts_subject(self) -> None:
        """The other text's doer is this text's subject: the pronoun adds nothing, the subject acts."""
        assert (
            same_doer(
                profile_text("Nate thanked Joanna for his recommendation"),
                profile_text("Joanna enjoyed the film on Nate's recommendation"),
            )
            is False
        )


class TestMutualStance:
    def test_a_stance_held_towards_each_other_tells_each_ones(self) -> None:
        """ "They express appreciation for each other's friendship" says Caroline's stance too: the
        stored card holds the new one (a dev-conversation pair the judge counted twice)."""
        one_sided = "Caroline expresses appreciation for her friendship with Melanie."
        assert not swapped(MUTUAL, one_sided)
        assert covered_by(profile_text(one_sided), profile_text(MUTUAL)) == 1.0

    def test_without_the_mutual_sentence_two_stances_are_two_facts(self) -> None:
        """The labelled pair the mutual card's first sentence comes from: two people's own stances."""
        first, second = texts(FRIENDSHIP_ROLE_SWAP)
        assert swapped(first, second)

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            # Another stance each other: supporting is not being grateful.
            (
                "Melanie values Caroline's friendship. They support each other.",
                "Caroline is grateful to Melanie",
            ),
            # Not a stance: a mutual sentence says nothing of who gave what.
            (
                "Melanie gave Caroline a painting. They appreciate each other.",
                "Caroline gave Melanie a painting",
            ),
        ],
    )
    def test_a_mutual_sentence_covers_only_its_own_stance(self, first: str, second: str) -> None:
        """The mutual sentence tells one stance of both; another stance or an act stays one-sided."""
        assert swapped(first, second)
