"""The roll-up end to end on the embedded store: promotion, idempotence, gating, crash safety."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.forwarding import ForwardingBackend
from dreamer.commands.rollup import format_report
from dreamer.config import Config
from dreamer.errors import PermanentBackendError
from dreamer.rollup import judging
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of
from dreamer.state import StateStore
from tests.support.configs import config_data, loaded
from tests.support.held import assert_profile_held

REPO = Path(__file__).resolve().parents[3]

WRITABLE = {"access": "read_write"}
CONFIG = config_data(
    {"global": {}, "shared": {}, "research": WRITABLE, "coder": WRITABLE},
    ("research", "coder"),
    state_dir="state",
    slot={"acquire_timeout_s": 2},
)

# Memories of a homelab profile, with a paraphrase pair.
MEMORIES = [
    "The nightly restic backup of host atlas runs at 02:30 to the NAS.",
    "Host atlas runs its nightly restic backup to the NAS at 02:30.",
    "Grafana listens on port 3000 on host hermes-mon.",
    "The user prefers answers with links to the upstream documentation.",
    "Nextcloud runs version 27.1 on host atlas behind nginx.",
]


def write_config(tmp_path: Path) -> Config:
    return loaded(tmp_path, CONFIG)


async def seed(cfg: Config, texts: list[str], profile: str = "research") -> None:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        await backend.retain(cfg.profile_bank_id(profile), [RetainItem(content=t) for t in texts])
    finally:
        await backend.aclose()


async def run_once(cfg: Config, profile: str = "research", **kw: Any) -> Any:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state:
            return await Rollup(cfg, backend, state).run(profile, **kw)
    finally:
        await backend.aclose()


async def assert_held(cfg: Config, profile: str = "research") -> None:
    """Every unit the runs summarised is held by the ledger cards citing it (tests/support/held.py)."""
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state:
            assert await assert_profile_held(cfg, backend, state, profile), "no unit was summarised"
    finally:
        await backend.aclose()


async def upstream_cards(cfg: Config) -> list[Any]:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        return await backend.all_units(cfg.bank_id("global"))
    finally:
        await backend.aclose()


class TestPromotion:
    async def test_new_units_become_tagged_cards_with_provenance(self, tmp_path: Path) -> None:
        """A profile with new units gets cards upstream with rollup/src tags and string provenance."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        report = await run_once(cfg)
        assert report.outcome == "promoted", report.reason
        cards = await upstream_cards(cfg)
        assert len(cards) == report.promoted > 0
        for card in cards:
            assert card.tags[:2] == ("rollup", "src:research")
            assert card.metadata["source_bank"] == "private__hermes__research"
            assert card.metadata["run_id"] == report.run_id
            assert all(isinstance(v, str) for v in card.metadata.values())
            assert card.document_id and card.document_id.startswith("rollup:research:")
        # the paraphrase pair collapsed: one card about the support group
        assert sum("restic" in c.text for c in cards) == 1
        await assert_held(cfg)

    async def test_a_unit_an_agent_tagged_rollup_is_rolled_up_and_counted(self, tmp_path: Path) -> None:
        """An agent's memory tagged "rollup" (without Dreamer's metadata mark) is rolled up like any
        other and counted in the report; Dreamer's own cards in a bank it reads stay out."""
        cfg = write_config(tmp_path)
        bank = cfg.bank_id("research")
        backend = EmbeddedBackend(cfg.embedded_path)
        try:
            await backend.retain(
                bank,
                [
                    RetainItem("The Jellyfin server moved to host orion on port 8096.", tags=("rollup",)),
                    RetainItem(
                        "Grafana dashboards are provisioned from the ops repository.",
                        tags=("rollup", "src:homelab"),
                        metadata={"dreamer_version": "1.0", "source_profile": "homelab"},
                    ),
                ],
            )
        finally:
            await backend.aclose()
        report = await run_once(cfg)
        assert report.outcome == "promoted", report.reason
        assert report.units_seen == 1 and report.units_tagged_rollup == 1
        texts = [card.text for card in await upstream_cards(cfg)]
        assert any("8096" in text for text in texts)
        assert not any("Grafana" in text for text in texts)
        assert format_report(report).count("tagged 'rollup' without being Dreamer's cards") == 1

    async def test_second_run_without_new_input_promotes_nothing(self, tmp_path: Path) -> None:
        """Rerunning with no new units is idle: no new card upstream."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        await run_once(cfg)
        before = await upstream_cards(cfg)
        again = await run_once(cfg)
        assert again.outcome == "idle" and again.promoted == 0
        assert len(await upstream_cards(cfg)) == len(before)

    async def test_paraphrase_in_a_later_run_reinforces(self, tmp_path: Path) -> None:
        """A later paraphrase of a promoted card reinforces it instead of adding a card."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        await run_once(cfg)
        n = len(await upstream_cards(cfg))
        await seed(cfg, ["The restic backup of atlas to the NAS runs nightly at 02:30."])
        report = await run_once(cfg)
        assert report.outcome == "reinforced", [p.to_json() for p in report.plan]
        assert len(await upstream_cards(cfg)) == n
        with StateStore.open(cfg.state_path) as st:
            assert max(c.reinforcements for c in st.ledger("private__hermes")) == 1
        await assert_held(cfg)

    async def test_changed_version_is_a_conflict_promoted_with_supersedes(self, tmp_path: Path) -> None:
        """Another version is never merged: recency_wins promotes the card pointing at the old one."""
        cfg = write_config(tmp_path)
        await seed(cfg, ["Nextcloud runs version 27.1 on host atlas behind nginx."])
        await run_once(cfg)
        await seed(cfg, ["Nextcloud runs version 28.0 on host atlas behind nginx."])
        report = await run_once(cfg)
        assert report.promoted == 1 and report.conflicts == 1, [p.to_json() for p in report.plan]
        cards = await upstream_cards(cfg)
        newest = [c for c in cards if "28.0" in c.text]
        assert newest and newest[0].metadata.get("supersedes", "").startswith("rollup:research:")
        await assert_held(cfg)

    async def test_dry_run_writes_nothing_and_keeps_the_watermark(self, tmp_path: Path) -> None:
        """--dry-run plans cards but writes nothing upstream and does not move the watermark."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        report = await run_once(cfg, dry_run=True)
        assert report.outcome == "dry_run" and report.plan
        assert await upstream_cards(cfg) == []
        with StateStore.open(cfg.state_path) as st:
            assert st.watermark("research").created_at is None

    async def test_idle_profile_takes_no_lock(self, tmp_path: Path) -> None:
        """A profile whose bank is empty is skipped as idle and never touches the slot lock file."""
        cfg = write_config(tmp_path)
        report = await run_once(cfg, "coder")
        assert report.outcome == "idle"
        assert not cfg.slot.lock_path.exists()


CRASH_STEPS = ["gated", "collected", "summarised", "judged", "promoted", "committed"]


@pytest.mark.slow
class TestNoFactCut:
    async def test_a_unit_longer_than_a_card_keeps_every_fact(self, tmp_path: Path) -> None:
        """The repro: a unit over the 400-character card cap with a port at its end, and the same
        port said alone. Both are promoted and a global card says 9431, citing both."""
        cfg = write_config(tmp_path)
        long = ("Operators restart the ingest service nightly. " * 12) + "Ingest listens on port 9431."
        await seed(cfg, [long, "Ingest listens on port 9431."])
        report = await run_once(cfg)
        assert report.outcome == "promoted" and report.units_promoted == 2, report.reason
        cards = await upstream_cards(cfg)
        assert any("9431" in c.text for c in cards), [c.text for c in cards]
        assert all(not c.text.endswith("…") and len(c.text) <= 400 for c in cards)
        await assert_held(cfg)


class TestLedgerSketches:
    async def test_promoted_cards_are_kept_with_their_sketch(self, tmp_path: Path) -> None:
        """Every ledger row a run commits carries the dedup sketch of its text."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        await run_once(cfg)
        with StateStore.open(cfg.state_path) as st:
            rows = st.ledger("private__hermes")
        assert rows
        for row in rows:
            assert Sketch.loads(row.sketch) == sketch_of(profile_text(row.text))

    async def test_a_run_sketches_ledger_cards_that_have_none(self, tmp_path: Path) -> None:
        """Cards of a state file from before the word index (no sketch, not indexed) are sketched and
        indexed by the next judging run, and still reinforced."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        await run_once(cfg)
        with sqlite3.connect(cfg.state_path) as conn:
            conn.execute("UPDATE ledger SET sketch = NULL, indexed = 0")
            conn.execute("DELETE FROM ledger_words")
        await seed(cfg, ["The restic backup of atlas to the NAS runs nightly at 02:30."])
        report = await run_once(cfg)
        assert report.outcome == "reinforced", [p.to_json() for p in report.plan]
        with StateStore.open(cfg.state_path) as st:
            rows = st.ledger("private__hermes")
            assert st.unindexed("private__hermes") == []
        assert all(Sketch.loads(row.sketch) == sketch_of(profile_text(row.text)) for row in rows)

    async def test_a_dry_run_on_an_index_of_another_version_compares_with_every_card(
        self, tmp_path: Path
    ) -> None:
        """A dry run may not rebuild an index made by another analysis, so it does not trust it:
        a restatement is still found (here the stale index holds no useful word at all)."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        await run_once(cfg)
        with sqlite3.connect(cfg.state_path) as conn:
            conn.execute("UPDATE meta SET value = 's0' WHERE key = 'index_version'")
            conn.execute("UPDATE ledger_words SET word = 'stale-' || word")
        await seed(cfg, ["The restic backup of atlas to the NAS runs nightly at 02:30."])

        class NoUpstreamRecall(ForwardingBackend):
            """Recall finds nothing, so only the ledger can show the restatement."""

            async def recall(self, *args: Any, **kwargs: Any) -> list[Any]:
                return []

        backend = NoUpstreamRecall(EmbeddedBackend(cfg.embedded_path))
        try:
            with StateStore.open(cfg.state_path) as state:
                report = await Rollup(cfg, backend, state).run("research", dry_run=True)
        finally:
            await backend.inner.aclose()
        assert [p.verdict for p in report.plan] == ["duplicate"], [p.to_json() for p in report.plan]


class TestPreparedRecalls:
    async def test_the_judge_step_tells_the_backend_which_recalls_follow(self, tmp_path: Path) -> None:
        """Before its recalls, one per card, the judge step hands a backend that can use it
        (`PreparesRecalls`) the cards' texts of the upstream bank at once, and a backend whose
        preparation fails still gets every recall and the run its verdicts."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        calls: list[tuple[str, int, int]] = []
        recalls: list[str] = []

        class Recording(EmbeddedBackend):
            async def prepare_recalls(self, bank_id: str, queries: Any, limit: int) -> None:
                calls.append((bank_id, len(queries), limit))
                raise PermanentBackendError("the store is read-only", operation="recall")

            async def recall(self, bank_id: str, query: str, **kwargs: Any) -> Any:
                recalls.append(query)
                return await super().recall(bank_id, query, **kwargs)

        backend = Recording(cfg.embedded_path)
        try:
            with StateStore.open(cfg.state_path) as state, capture_logs() as logs:
                report = await Rollup(cfg, backend, state).run("research")
        finally:
            await backend.aclose()
        assert calls == [(cfg.upstream_bank_id("research"), report.cards, cfg.rollup.semantic_top_k)]
        assert len(recalls) == report.cards > 0 and report.promoted > 0
        assert any("could not prepare the recalls" in entry["event"] for entry in logs)

    async def test_the_recalls_go_two_at_once_and_each_card_gets_its_own(self, tmp_path: Path) -> None:
        """The cards' upstream recalls run two at a time (the store reads them on two connections),
        never more, and each card is judged against what its own recall found: the verdicts equal
        those of a run whose recalls go one by one. The backend records and holds each recall
        until another is in flight (bounded by a deadline), so one at a time the run would fail."""
        memories = [f"Host nas0{i} runs {name} on port {3000 + i}." for i, name in enumerate("ABCDEF")]

        async def run(cfg: Config, backend: EmbeddedBackend) -> Any:
            try:
                with StateStore.open(cfg.state_path) as state:
                    return await Rollup(cfg, backend, state).run("research", dry_run=True)
            finally:
                await backend.aclose()

        class Overlapping(EmbeddedBackend):
            running = most = 0
            two = None

            async def recall(self, bank_id: str, query: str, **kwargs: Any) -> Any:
                cls = type(self)
                cls.running += 1
                cls.most = max(cls.most, cls.running)
                cls.two = cls.two or anyio.Event()
                if cls.running == 2:
                    cls.two.set()
                with anyio.fail_after(10):
                    await cls.two.wait()
                try:
                    return await super().recall(bank_id, query, **kwargs)
                finally:
                    cls.running -= 1

        together_cfg = write_config(tmp_path / "together")
        alone_cfg = write_config(tmp_path / "alone")
        for cfg in (together_cfg, alone_cfg):
            await seed(cfg, MEMORIES + memories)
            await run_once(cfg)  # the first cards upstream, for the recalls to find
            await seed(cfg, [m.replace("runs", "still runs") for m in memories])
        together = await run(together_cfg, Overlapping(together_cfg.embedded_path))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(judging, "RECALLS_AT_ONCE", 1)
            alone = await run(alone_cfg, EmbeddedBackend(alone_cfg.embedded_path))
        assert Overlapping.most == 2 and together.cards == alone.cards >= 4
        assert [(p.verdict, p.text) for p in together.plan] == [(p.verdict, p.text) for p in alone.plan]
        assert {p.verdict for p in together.plan} >= {"duplicate"}


class TestCrashSafety:
    @pytest.mark.parametrize("step", CRASH_STEPS)
    async def test_sigkill_at_each_step_then_rerun_leaves_each_card_once(
        self, tmp_path: Path, step: str
    ) -> None:
        """Killed with SIGKILL at a step boundary, the rerun leaves upstream as if it ran once."""
        reference_dir = tmp_path / "reference"
        reference_dir.mkdir()
        ref_cfg = write_config(reference_dir)
        await seed(ref_cfg, MEMORIES)
        await run_once(ref_cfg)
        expected = sorted(c.document_id for c in await upstream_cards(ref_cfg))
        await assert_held(ref_cfg)

        crash_dir = tmp_path / "crash"
        crash_dir.mkdir()
        cfg = write_config(crash_dir)
        await seed(cfg, MEMORIES)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.support.crash_rollup",
                str(crash_dir / "config.toml"),
                "research",
                step,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == -9, proc.stderr
        await run_once(cfg)
        ids = [c.document_id for c in await upstream_cards(cfg)]
        assert not [d for d, n in Counter(ids).items() if n > 1], "duplicate card upstream"
        assert sorted(ids) == expected, "missing or extra card"
        with StateStore.open(cfg.state_path) as st:
            assert sorted(c.document_id for c in st.ledger("private__hermes")) == expected
        await assert_held(cfg)


class TestSince:
    async def test_since_rereads_units_the_watermark_already_covers(self, tmp_path: Path) -> None:
        """--since overrides the watermark for one run: already rolled-up units are read (and reinforce)."""
        cfg = write_config(tmp_path)
        await seed(cfg, MEMORIES)
        first = await run_once(cfg)
        n = len(await upstream_cards(cfg))
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        again = await run_once(cfg, since=epoch)
        assert again.units_seen == first.units_seen == len(MEMORIES)
        assert again.outcome == "reinforced" and again.promoted == 0
        assert len(await upstream_cards(cfg)) == n
        await assert_held(cfg)


class TestChatter:
    async def test_filler_passes_the_watermark_without_becoming_a_card(self, tmp_path: Path) -> None:
        """Filler and a contact record are read and covered by the watermark, but nothing is promoted."""
        cfg = write_config(tmp_path)
        await seed(
            cfg,
            [
                "ok thanks, that's all for now",
                "Sounds good, see you tomorrow!",
                "Nate and Joanna caught up at 7:31 pm on 21 January, 2022.",
            ],
        )
        report = await run_once(cfg)
        assert report.outcome == "nothing_new" and report.units_seen == 3
        assert await upstream_cards(cfg) == []
        with StateStore.open(cfg.state_path) as st:
            assert st.watermark("research").created_at is not None


class TestOneFactAcrossSessions:
    """A fact told again in later sessions reinforces the one card that tells it, whether that card
    says it whole or as one of its sentences; a later instance of an event is promoted beside it."""

    async def test_a_stance_told_in_four_sessions_is_one_card_seen_four_times(self, tmp_path: Path) -> None:
        """Session 1 folds the stance into a two-sentence card; sessions 2-4 restate one sentence of
        it in other words: one card upstream, reinforced three times, its dates those of the runs,
        and recall, the peer card and the ledger say so."""
        from dreamer.peercard.build import build_peer_card

        cfg = write_config(tmp_path)
        days = iter(datetime(2023, month, 8, 12, tzinfo=UTC) for month in (3, 5, 7, 10))
        await seed(
            cfg,
            [
                "Sam is grateful for Evan's support and encouragement with his new diet. "
                "Sam started cooking healthy meals at home every evening.",
            ],
        )
        restatements = [
            "Sam is thankful for Evan's support and encouragement with his new diet.",
            "Sam is grateful for Evan's support and encouragement with the new diet.",
            "Sam stays grateful for Evan's support and encouragement with his diet.",
        ]
        for index in range(4):
            now = next(days)
            if index:
                await seed(cfg, [restatements[index - 1]])
            backend = EmbeddedBackend(cfg.embedded_path)
            try:
                with StateStore.open(cfg.state_path) as state:
                    report = await Rollup(cfg, backend, state, clock=lambda now=now: now).run("research")
            finally:
                await backend.aclose()
            assert report.outcome == ("promoted" if index == 0 else "reinforced"), [
                p.to_json() for p in report.plan
            ]
        cards = await upstream_cards(cfg)
        assert len(cards) == 1
        with StateStore.open(cfg.state_path) as state:
            [card] = state.ledger("private__hermes")
        assert card.told is not None and card.told.render() == "seen 4 times, 2023-03-08 to 2023-10-08"
        assert len(card.source_ids) == 4
        built = build_peer_card([card], profile="research", policy="recency_wins")
        assert built is not None and built.entries[0].endswith("(seen 4×, 2023-03 to 2023-10)")
        await assert_held(cfg)

    async def test_a_later_run_repeating_two_drafts_of_one_card_counts_once(self, tmp_path: Path) -> None:
        """Two units of one later session, each restating another sentence of a stored card: two
        drafts, both reinforcing it, and its count goes up once (roll-ups that found it, not drafts)."""
        cfg = write_config(tmp_path)
        await seed(
            cfg,
            [
                "The nightly restic backup of host atlas runs at 02:30 to the NAS. "
                "Grafana listens on port 3000 on host hermes-mon.",
            ],
        )
        await run_once(cfg)
        await seed(
            cfg,
            [
                "The restic backup of host atlas runs nightly at 02:30 to the NAS.",
                "Grafana on host hermes-mon listens on port 3000.",
            ],
        )
        report = await run_once(cfg)
        assert report.outcome == "reinforced" and report.reinforced == 2, [p.to_json() for p in report.plan]
        with StateStore.open(cfg.state_path) as state:
            [card] = state.ledger("private__hermes")
        assert card.reinforcements == 1 and len(card.source_ids) == 3
        await assert_held(cfg)


class TestExtractiveBatch:
    """Without a model a batch holds `rollup.extractive_batch` units, not `top_n`: the fold meets a
    fact told twice in one run however far apart the two tellings are."""

    TOLD = (
        "Caroline attended an LGBTQ support group.",
        "Melanie painted a sunrise over a lake.",
        "Jon lost his banking job and plans to open a dance studio.",
        "Nate won his first video game tournament playing Counter-Strike.",
        "Caroline attended an LGBTQ support group on 7 May 2023 and found it powerful.",
    )

    def config(self, tmp_path: Path, **rollup: Any) -> Config:
        data = config_data(
            {"global": {}, "shared": {}, "research": WRITABLE},
            {"research": {"top_n": 2}},
            state_dir="state",
            slot={"acquire_timeout_s": 2},
            rollup={"max_batches_per_run": 5, **rollup},
        )
        return loaded(tmp_path, data)

    async def texts_upstream(self, cfg: Config) -> list[str]:
        await seed(cfg, list(self.TOLD))
        report = await run_once(cfg)
        assert report.units_pending == 0
        await assert_held(cfg)
        return sorted(card.text for card in await upstream_cards(cfg))

    async def test_a_fact_told_twice_in_one_run_is_one_card_past_top_n(self, tmp_path: Path) -> None:
        """Five units with top_n 2: the first telling folds into the fuller fifth, one batch, four
        cards, and the short telling is in none alone."""
        texts = await self.texts_upstream(self.config(tmp_path))
        assert len(texts) == 4, texts
        assert "Caroline attended an LGBTQ support group." not in texts
        assert any(t.startswith("Caroline attended an LGBTQ support group on 7 May 2023") for t in texts)

    async def test_batches_of_top_n_keep_the_two_tellings_apart(self, tmp_path: Path) -> None:
        """The same units in batches of 2 (`extractive_batch = 2`): the tellings are in the first
        and the third batch, and each is its own card (the ledger cannot fold a stored card)."""
        texts = await self.texts_upstream(self.config(tmp_path, extractive_batch=2))
        assert len(texts) == 5, texts
        assert "Caroline attended an LGBTQ support group." in texts
