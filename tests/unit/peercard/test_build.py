"""The peer card: which cards, in what order, within what bounds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamer.hermes.memory.entries import ENTRY_DELIMITER, parse_entries
from dreamer.peercard import build as peercard_build
from dreamer.peercard.build import LOOKAHEAD, build_peer_card
from dreamer.state import LedgerCard
from tests.support.peer_cards import HOSTILE, RULE, build, card


class TestSelection:
    def test_markers_from_kind(self) -> None:
        """identity, attribute/preference, relationship, instruction are marked; other kinds are not."""
        built = build(
            [
                card("Evan is a nurse.", kind="identity"),
                card("Evan is tall.", kind="attribute"),
                card("Evan likes tea.", kind="preference"),
                card("Evan is married to Sam.", kind="relationship"),
                card("Answer Evan in French.", kind="instruction"),
                card("Evan owns a boat.", kind="fact"),
            ]
        )
        assert sorted(built.entries) == sorted(
            [
                "IDENTITY: Evan is a nurse.",
                "ATTRIBUTE: Evan is tall.",
                "ATTRIBUTE: Evan likes tea.",
                "RELATIONSHIP: Evan is married to Sam.",
                "INSTRUCTION: Answer Evan in French.",
                "Evan owns a boat.",
            ]
        )

    def test_marker_already_in_text_is_kept_once(self) -> None:
        """A text that starts with a marker keeps one marker, upper-cased, never two."""
        built = build(
            [
                card("identity: Evan is a nurse.", kind="fact"),
                card("INSTRUCTION: reply briefly", kind="instruction"),
            ]
        )
        assert set(built.entries) == {"IDENTITY: Evan is a nurse.", "INSTRUCTION: reply briefly"}

    def test_stable_first_then_reinforced_then_sources_then_newest(self) -> None:
        """Classified kinds first, events last; within a tier more reinforced, more sources, newer."""
        built = build(
            [
                card("An event happened.", kind="event", reinforcements=9),
                card("Plain fact.", kind="fact", reinforcements=9),
                card("Older identity.", kind="identity", age_h=5),
                card("Newer identity.", kind="identity", age_h=1),
                card("Sourced identity.", kind="identity", sources=3),
                card("Reinforced identity.", kind="identity", reinforcements=2),
            ]
        )
        assert built.entries == (
            "IDENTITY: Reinforced identity. (seen 3×, 2025-03)",
            "IDENTITY: Sourced identity.",
            "IDENTITY: Newer identity.",
            "IDENTITY: Older identity.",
            "Plain fact. (seen 10×, 2025-03)",
            "An event happened. (seen 10×, 2025-03)",
        )

    def test_recency_wins_drops_superseded(self) -> None:
        """With recency_wins a card replaced by a newer one is left out."""
        old = card("Evan lives in Paris.", kind="attribute", doc="old", reinforcements=5, age_h=9)
        new = card("Evan lives in Lyon.", kind="attribute", doc="new", supersedes="old")
        assert build([old, new]).entries == ("ATTRIBUTE: Evan lives in Lyon.",)

    def test_keep_both_keeps_both_newer_first(self) -> None:
        """With keep_both both stay, and the newer one comes before the card it replaced."""
        old = card("Evan lives in Paris.", kind="attribute", doc="old", reinforcements=5, age_h=9)
        new = card("Evan lives in Lyon.", kind="attribute", doc="new", supersedes="old")
        assert build([old, new], policy="keep_both").entries == (
            "ATTRIBUTE: Evan lives in Lyon.",
            "ATTRIBUTE: Evan lives in Paris. (seen 6×, 2025-03)",
        )

    def test_superseded_by_another_profile_still_counts(self) -> None:
        """A newer card of another profile that supersedes this profile's card drops it."""
        old = card("Evan lives in Paris.", kind="attribute", doc="old")
        new = card("Evan lives in Lyon.", kind="attribute", doc="new", profile="coder", supersedes="old")
        assert build_peer_card([old, new], profile="research", policy="recency_wins") is None

    def test_profile_filter_includes_reinforced_cards(self) -> None:
        """A profile's card holds what it promoted and what it reinforced; global holds everything."""
        cards = [
            card("Mine.", profile="research"),
            card("Reinforced by me.", profile="coder", profiles=("coder", "research")),
            card("Not mine.", profile="coder"),
        ]
        assert set(build(cards).entries) == {"Mine.", "Reinforced by me."}
        assert len(build(cards, profile=None).entries) == 3

    def test_case_insensitive_dedup(self) -> None:
        """Entries that differ only in case, punctuation or marker appear once (the better one)."""
        built = build(
            [
                card("Evan likes TEA!", kind="preference", reinforcements=1),
                card("evan likes tea", kind="fact"),
            ]
        )
        assert built.entries == ("ATTRIBUTE: Evan likes TEA! (seen 2×, 2025-03)",)

    def test_long_entry_cut_on_a_word_boundary(self) -> None:
        """An entry over the limit is cut at a word boundary and ends with an ellipsis."""
        text = "Evan " + " ".join(["collects"] * 40)
        (entry,) = build([card(text, kind="identity")], max_entry_chars=60).entries
        assert len(entry) <= 60 and entry.endswith("collects…")
        assert entry.startswith("IDENTITY: Evan collects")

    def test_a_card_of_several_sentences_keeps_its_first_ones_whole(self) -> None:
        """A folded card over the limit is cut after its last whole sentence that fits, not in the
        middle of the next one."""
        first = "Caroline chose an adoption agency that helps LGBTQ+ folks because of its inclusivity."
        text = f"{first} Caroline explains that she chose that agency because it supports the community."
        (entry,) = build([card(text, kind="fact")], max_entry_chars=120).entries
        assert entry == f"{first[:-1]}…"

    def test_entry_is_one_line(self) -> None:
        """Line breaks and runs of spaces inside a card become single spaces."""
        assert build([card("Evan\n\nlikes   tea.\r\n")]).entries == ("Evan likes tea.",)

    def test_budget_skips_what_does_not_fit_and_takes_smaller_ones(self) -> None:
        """A card too big for what is left is left out; a smaller card after it still gets in."""
        big = card("B" * 10 + " big card that is rather long indeed.", kind="identity")
        small = card("Tiny.", kind="fact")
        first = card("First card is here.", kind="identity", sources=2)
        budget = len("IDENTITY: First card is here.") + len(ENTRY_DELIMITER) + len("Tiny.")
        built = build([big, small, first], budget_chars=budget)
        assert built.entries == ("IDENTITY: First card is here.", "Tiny.")
        assert built.chars == budget and built.left_out == 1

    def test_smaller_entries_are_sought_only_within_the_lookahead(self) -> None:
        """After the first entry too big for the budget, LOOKAHEAD more cards are looked at for a
        smaller one; a short card ranked after them is not read, and every card not shown is left out."""
        head = card("First card is here.", doc="head", reinforcements=10**6)
        head_entry = "First card is here. (seen 1000001×, 2025-03)"
        near_entry = "Near. (seen 99903×, 2025-03)"
        big = [
            card(f"Big card {i} " + "x" * 150, doc=f"big{i}", reinforcements=10**5 - i) for i in range(200)
        ]
        near = card("Near.", doc="near", reinforcements=10**5 - LOOKAHEAD + 2)
        far = card("Far.", doc="far", reinforcements=1)
        # Room for "Far." too: only the lookahead keeps it out.
        budget = len(head_entry) + 2 * len(ENTRY_DELIMITER) + len(near_entry) + len("Far. (seen 2×, 2025-03)")
        built = build([far, *big, near, head], budget_chars=budget)
        assert built.entries == (head_entry, near_entry)
        assert built.left_out == 200 + 1

    def test_the_cards_read_do_not_grow_with_the_profile(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A full card stops reading: of 5,000 cards, only those up to the lookahead past the first
        misfit are formatted, the rest are counted in left_out."""
        formatted = 0
        real = peercard_build.format_entry

        def counting(*args: Any, **kwargs: Any) -> tuple[str, str]:
            nonlocal formatted
            formatted += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(peercard_build, "format_entry", counting)
        cards = [
            card(f"Fact number {i} about the homelab and its backups.", doc=f"d{i}") for i in range(5000)
        ]
        built = build(cards)
        shown = len(built.entries)
        assert formatted <= shown + 1 + LOOKAHEAD
        assert shown + built.left_out == 5000

    def test_at_most_max_entries(self) -> None:
        """No more than max_entries entries, the rest counted as left out."""
        built = build([card(f"Fact number {i}.") for i in range(50)])
        assert len(built.entries) == 40 and built.left_out == 10

    def test_empty_card_is_none(self) -> None:
        """No card, or no card with words, gives no peer card at all."""
        assert build_peer_card([], profile=None, policy="recency_wins") is None
        assert build_peer_card([card("!!! ???")], profile="research", policy="keep_both") is None
        assert (
            build_peer_card([card("Elsewhere.", profile="coder")], profile="research", policy="keep_both")
            is None
        )

    def test_bad_bounds_are_refused(self) -> None:
        """Entry limits below what a marker needs, or zero budgets, are refused."""
        with pytest.raises(ValueError, match="max_entry_chars must be at least 20"):
            build_peer_card([card("x")], profile=None, policy="recency_wins", max_entry_chars=5)
        with pytest.raises(ValueError, match="at least 1"):
            build_peer_card([card("x")], profile=None, policy="recency_wins", budget_chars=0)


KINDS = st.sampled_from(
    ["identity", "attribute", "preference", "relationship", "instruction", "fact", "event", "x"]
)
TEXTS = st.lists(st.sampled_from(HOSTILE) | st.text(min_size=1, max_size=60), min_size=1, max_size=4).map(
    "".join
)


@st.composite
def ledgers(draw: st.DrawFn) -> list[LedgerCard]:
    size = draw(st.integers(min_value=0, max_value=45))
    cards = []
    for i in range(size):
        cards.append(
            card(
                draw(TEXTS),
                kind=draw(KINDS),
                doc=f"d{i}",
                profile=draw(st.sampled_from(["research", "coder"])),
                reinforcements=draw(st.integers(0, 5)),
                sources=draw(st.integers(0, 4)),
                age_h=draw(st.integers(0, 100)),
                supersedes=draw(st.none() | st.sampled_from([f"d{j}" for j in range(size)])),
            )
        )
    return cards


class TestProperties:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        ledgers(),
        st.sampled_from(["research", None]),
        st.sampled_from(["recency_wins", "keep_both"]),
        st.integers(min_value=1, max_value=40),
        st.integers(min_value=20, max_value=200),
        st.integers(min_value=1, max_value=3000),
    )
    def test_bounds_and_framing_hold_for_any_ledger(
        self,
        cards: list[LedgerCard],
        profile: str | None,
        policy: Any,
        max_entries: int,
        max_entry_chars: int,
        budget: int,
    ) -> None:
        """Any ledger: within count, entry and budget limits, no tag or token, framing intact."""
        built = build_peer_card(
            cards,
            profile=profile,
            policy=policy,
            max_entries=max_entries,
            max_entry_chars=max_entry_chars,
            budget_chars=budget,
        )
        if built is None:
            return
        assert 1 <= len(built.entries) <= max_entries <= 40
        assert all(0 < len(entry) <= max_entry_chars for entry in built.entries)
        assert len(ENTRY_DELIMITER.join(built.entries)) == built.chars <= budget
        for entry in built.entries:
            assert "</system-reminder>" not in entry and "<|" not in entry
            assert "\n" not in entry and entry == entry.strip()
        lowered = [" ".join(e.lower().split()) for e in built.entries]
        assert len(set(lowered)) == len(lowered)
        rendered = built.render()
        lines = rendered.split("\n")
        assert [i for i, line in enumerate(lines) if "═" in line] == [0, 2]
        assert lines[1].startswith(f"PEER CARD ({built.name}) [")
        content = rendered.split(f"{RULE}\n", 2)[2]
        assert parse_entries(content) == list(built.entries)
        assert "</system-reminder>" not in rendered and "<|" not in rendered
