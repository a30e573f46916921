"""What a promoted card carries upstream under each conflict policy, scoped or not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dreamer.config import ConflictPolicy
from dreamer.rollup.analysis import kept_profile
from dreamer.rollup.dedup import Verdict, VerdictKind
from dreamer.rollup.existing import sentence_sketches
from dreamer.rollup.promote import RunFacts, ledger_row, retain_item
from dreamer.rollup.report import CardPlan
from dreamer.rollup.similarity import Sketch, profile_text

NOW = datetime(2026, 11, 1, tzinfo=UTC)
OLD = "rollup:homelab:old"


def facts(policy: ConflictPolicy) -> RunFacts:
    return RunFacts("homelab", "bank-homelab", "bank-global", "run-1", None, None, policy)


def plan(verdict: str) -> CardPlan:
    return CardPlan(
        "Nextcloud runs version 28.0 on host atlas.", "fact", ("u1",), "rollup:homelab:new", verdict, ""
    )


CONFLICT = Verdict(VerdictKind.CONFLICT, "changed version", matched_id=OLD, changed=("version",))
NEW = Verdict(VerdictKind.NEW, "no match")


class TestRelated:
    def test_a_new_card_near_a_stored_one_names_it(self) -> None:
        """A new card the judge could not merge into a near stored card is linked to it; a plain
        new card carries no link."""
        near = Verdict(VerdictKind.NEW, "near, not held", matched_id=OLD)
        assert retain_item(plan("new"), near, facts("recency_wins"), NOW).metadata["related_to"] == OLD
        assert "related_to" not in retain_item(plan("new"), NEW, facts("recency_wins"), NOW).metadata


class TestConflictPolicies:
    def test_recency_wins_supersedes_the_older_card(self) -> None:
        """An unscoped recency_wins conflict carries the supersedes tag and metadata, and its ledger row."""
        item = retain_item(plan("conflict"), CONFLICT, facts("recency_wins"), NOW)
        assert "supersedes" in item.tags and item.metadata["supersedes"] == OLD
        assert ledger_row(plan("conflict"), item, facts("recency_wins"), NOW).supersedes == OLD

    def test_keep_both_scopes_the_card_to_its_profile(self) -> None:
        """An unscoped keep_both conflict is tagged scope:<profile> and supersedes nothing."""
        item = retain_item(plan("conflict"), CONFLICT, facts("keep_both"), NOW)
        assert "scope:homelab" in item.tags and "supersedes" not in item.tags
        assert "supersedes" not in item.metadata

    @pytest.mark.parametrize("policy", ["recency_wins", "keep_both"])
    def test_a_scoped_cards_conflict_is_kept_both(self, policy: ConflictPolicy) -> None:
        """A card from memories retained with --scope staging carries scope:staging and, in a conflict,
        supersedes nothing under either policy: a fact within one scope does not overturn another."""
        item = retain_item(plan("conflict"), CONFLICT, facts(policy), NOW, scopes=("scope:staging",))
        assert "scope:staging" in item.tags
        assert "supersedes" not in item.tags and "supersedes" not in item.metadata
        assert ledger_row(plan("conflict"), item, facts(policy), NOW).supersedes is None

    def test_a_new_scoped_card_carries_its_scopes_once(self) -> None:
        """The sources' scope tags go up with the card, each once, in order; other tags do not."""
        item = retain_item(
            plan("new"),
            NEW,
            facts("recency_wins"),
            NOW,
            scopes=("scope:b", "scope:a", "scope:b", "scope:", "x"),
        )
        assert item.tags == ("rollup", "src:homelab", "scope:b", "scope:a")


class TestLedgerRow:
    def test_a_card_is_written_with_its_analysis_and_its_sentences_sketches(self) -> None:
        """The row keeps the sentences' sketches the judge reads its parts from, and the analysis
        it reads the card's profile from; a card of one sentence keeps no sentences' sketches (an
        empty field before its analysis)."""
        two = CardPlan(
            "Nextcloud runs version 28.0 on host atlas. It sits behind nginx.",
            "fact",
            ("u1", "u2"),
            "rollup:homelab:two",
            "new",
            "",
        )
        row = ledger_row(two, retain_item(two, NEW, facts("recency_wins"), NOW), facts("recency_wins"), NOW)
        kept = Sketch.loads(row.sketch)
        assert kept is not None and kept.parts == sentence_sketches(two.text) is not None
        assert kept_profile(two.text, kept) == profile_text(two.text)
        one = ledger_row(
            plan("new"), retain_item(plan("new"), NEW, facts("recency_wins"), NOW), facts("recency_wins"), NOW
        )
        assert one.sketch is not None and one.sketch.split("\t")[4] == ""
        alone = Sketch.loads(one.sketch)
        assert alone is not None and kept_profile(plan("new").text, alone) == profile_text(plan("new").text)
