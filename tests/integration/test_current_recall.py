"""What the agent reads is current: after a ``recency_wins`` conflict, recall (the router, the tool
call, ``dreamer recall`` and its ``--json``) marks the older card superseded by the newer one and
ranks it below; a scoped retain carries its tag. On the embedded store and a real Hindsight.

The cards are written exactly as a roll-up promotes them (:func:`dreamer.rollup.promote.retain_item`
upstream, :func:`~dreamer.rollup.promote.ledger_row` committed to a real state file), so the same
assertions hold on Hindsight, whose LLM would decide a real run's cards. The whole roll-up making the
conflict runs in ``tests/e2e/test_cli_flow.py`` (the demo) and in :class:`TestScopedConflict` here.
The Hindsight cases need ``DREAMER_TEST_HINDSIGHT_URL`` and ``DREAMER_TEST_HINDSIGHT_API_KEY``; each
uses fresh bank ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from dreamer.backends.base import MemoryBackend
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config, load_config
from dreamer.readside.answers import RecallAnswer
from dreamer.readside.router import BankRouter
from dreamer.readside.scope import ScopeError
from dreamer.readside.tools import HINDSIGHT_TOOLS, run_tool_call
from dreamer.rollup.dedup import Verdict, VerdictKind
from dreamer.rollup.promote import RunFacts, ledger_row, retain_item
from dreamer.rollup.report import CardPlan
from dreamer.state import LedgerCard, Reinforcement, StateStore, Watermark
from dreamer.text import card_document_id
from tests.support.configs import config_data, write_toml

HINDSIGHT_URL_ENV = "DREAMER_TEST_HINDSIGHT_URL"
HINDSIGHT_KEY_ENV = "DREAMER_TEST_HINDSIGHT_API_KEY"
PROFILE = "homelab"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass
class World:
    """A configuration file with fresh bank ids, its state file and a backend on the same store."""

    kind: str
    home: Path
    config: Config
    backend: MemoryBackend
    word: str

    def bank_id(self, alias: str) -> str:
        return self.config.bank_id(alias)

    def dreamer(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``dreamer ARGS --config <this world's file>`` as a subprocess."""
        env = {key: value for key, value in os.environ.items() if key != "NOTIFY_SOCKET"}
        return subprocess.run(
            [sys.executable, "-m", "dreamer", *args, "--config", str(self.home / "config.toml")],
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )


def world_config(kind: str, home: Path, suffix: str) -> dict[str, Any]:
    writable = {"access": "read_write"}
    backend: dict[str, Any] = {"kind": "embedded"}
    if kind == "hindsight":
        url = os.environ.get(HINDSIGHT_URL_ENV, "").strip()
        if not url or not os.environ.get(HINDSIGHT_KEY_ENV):
            pytest.skip(
                f"{HINDSIGHT_URL_ENV} / {HINDSIGHT_KEY_ENV} not set: start `scripts/hindsight-dev up`"
            )
        backend = {
            "kind": "hindsight",
            "hindsight": {"url": url.rstrip("/"), "api_key_env": HINDSIGHT_KEY_ENV, "read_timeout_s": 120.0},
        }
    return config_data(
        {"global": {}, "shared": {}, PROFILE: writable},
        {PROFILE: {"conflict_policy": "recency_wins"}},
        bank_id=lambda alias: f"rc-{alias}-{suffix}",
        state_dir="state",
        backend=backend,
        retry={"max_attempts": 30, "base_delay_s": 0.5, "max_delay_s": 5.0, "retry_after_cap_s": 5.0},
    )


def open_backend(config: Config) -> MemoryBackend:
    if config.backend.kind == "embedded":
        return EmbeddedBackend(config.embedded_path)
    from dreamer.backends.hindsight.backend import HindsightBackend

    settings = config.backend.hindsight.model_copy(
        update={"api_key": SecretStr(os.environ[HINDSIGHT_KEY_ENV]), "read_timeout_s": 120.0}
    )
    return HindsightBackend(settings)


@pytest.fixture(
    params=["embedded", pytest.param("hindsight", marks=[pytest.mark.hindsight, pytest.mark.slow])]
)
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    suffix = uuid.uuid4().hex[:10]
    write_toml(tmp_path / "config.toml", world_config(request.param, tmp_path, suffix))
    config = load_config(tmp_path / "config.toml")
    backend = open_backend(config)
    try:
        yield World(request.param, tmp_path, config, backend, "zq" + suffix)
    finally:
        await backend.aclose()


# --- promoting cards as the roll-up does -------------------------------------------------------


async def promote(
    world: World, text: str, *, supersedes: str | None = None, minutes: int = 0, upstream: bool = True
) -> str:
    """Promote ``text`` as a card of profile homelab (a ``recency_wins`` conflict superseding
    ``supersedes`` when given): upstream through ``retain_item`` unless ``upstream`` is False, and
    its ledger row committed to the state file. Returns the card's document id."""
    document_id = card_document_id(PROFILE, text)
    plan = CardPlan(text, "fact", (f"u-{minutes}",), document_id, "conflict" if supersedes else "new", "")
    verdict = (
        Verdict(VerdictKind.CONFLICT, "changed version", matched_id=supersedes, changed=("version",))
        if supersedes
        else Verdict(VerdictKind.NEW, "no match")
    )
    run_id = f"run-{minutes}"
    facts = RunFacts(
        PROFILE, world.bank_id(PROFILE), world.bank_id("global"), run_id, None, None, "recency_wins"
    )
    when = T0 + timedelta(minutes=minutes)
    item = retain_item(plan, verdict, facts, when)
    if upstream:
        await world.backend.retain(world.bank_id("global"), [item])
    with StateStore.open(world.config.state_path) as state:
        state.record_run_start(run_id, f"rollup:{PROFILE}", when)
        state.commit_rollup(
            profile=PROFILE,
            bank_id=world.bank_id(PROFILE),
            watermark=Watermark(),
            promoted=[ledger_row(plan, item, facts, when)],
            reinforced=[],
            run_id=run_id,
            outcome="promoted",
            detail="",
            counts={},
            finished_at=when,
        )
    return document_id


def versions(world: World) -> tuple[str, str]:
    return (
        f"Nextcloud {world.word} runs version 27.1 on host atlas behind nginx.",
        f"Nextcloud {world.word} runs version 28.0 on host atlas behind nginx.",
    )


async def conflict(world: World) -> tuple[str, str, str, str]:
    """The 27.1 card, then the 28.0 card superseding it; their texts and document ids."""
    old_text, new_text = versions(world)
    old_id = await promote(world, old_text)
    new_id = await promote(world, new_text, supersedes=old_id, minutes=60)
    return old_text, old_id, new_text, new_id


def hits(answer: RecallAnswer, word: str) -> list[Any]:
    return [item for item in answer.items if word in item.text]


# --- the tests ------------------------------------------------------------------------------------


class TestSupersededIsMarked:
    async def test_router_and_tool_mark_the_older_card_and_rank_it_below(self, world: World) -> None:
        """After a recency_wins conflict the read-union shows 28.0 first and 27.1 marked superseded
        by 28.0's text, through the router and through the memory_recall and hindsight_recall tool
        calls; the hits' own metadata suffices (a router without the ledger marks it too)."""
        old_text, old_id, new_text, new_id = await conflict(world)
        query = {"query": f"Nextcloud {world.word} version"}
        with StateStore.open(world.config.state_path) as ledger:
            router = BankRouter(world.config, world.backend, profile=PROFILE, ledger=ledger)
            answer = await router.read_union(query["query"])
            tool_answer = await run_tool_call(router, "memory_recall", query)
        bare = BankRouter(world.config, world.backend, profile=PROFILE)
        hermes_answer = await run_tool_call(bare, "hindsight_recall", query, HINDSIGHT_TOOLS)

        for result in (answer, tool_answer, hermes_answer):
            assert isinstance(result, RecallAnswer)
            found = hits(result, world.word)
            texts = [h.text for h in found]
            assert new_text in texts and old_text in texts
            assert texts.index(new_text) < texts.index(old_text)
            old = found[texts.index(old_text)]
            assert old.superseded_by is not None and old.superseded_by.text == new_text
            assert old.superseded_by.document_id == new_id
            assert found[texts.index(new_text)].superseded_by is None
            rendered = result.render()
            assert f"[global] (superseded) {old_text} — superseded by: {new_text}" in rendered.splitlines()
            assert f"[global] {new_text}" in rendered.splitlines()
        assert old_id != new_id

    async def test_the_ledger_alone_marks_a_card_whose_successor_was_not_found(self, world: World) -> None:
        """The newer card is only in the ledger (not among the hits): the older one is still marked
        with the newer text; without the ledger it is not."""
        old_text, new_text = versions(world)
        old_id = await promote(world, old_text)
        await promote(world, new_text, supersedes=old_id, minutes=60, upstream=False)

        with StateStore.open(world.config.state_path) as ledger:
            marked = await BankRouter(world.config, world.backend, profile=PROFILE, ledger=ledger).recall(
                f"Nextcloud {world.word} version", banks=["global"]
            )
        unmarked = await BankRouter(world.config, world.backend, profile=PROFILE).recall(
            f"Nextcloud {world.word} version", banks=["global"]
        )
        (old,) = hits(marked, world.word)
        assert old.superseded_by is not None and old.superseded_by.text == new_text
        assert [h.superseded_by for h in hits(unmarked, world.word)] == [None]

    async def test_cli_recall_and_json_mark_it(self, world: World) -> None:
        """`dreamer recall --profile homelab` prints the mark; `--json` says superseded and by what."""
        old_text, old_id, new_text, new_id = await conflict(world)
        query = f"Nextcloud {world.word} version"

        text = world.dreamer("recall", query, "--profile", PROFILE)
        assert text.returncode == 0, text.stderr
        lines = [line for line in text.stdout.splitlines() if world.word in line]
        assert lines.index(f"[global] {new_text}") < lines.index(
            f"[global] (superseded) {old_text} — superseded by: {new_text}"
        )

        doc = world.dreamer("recall", query, "--profile", PROFILE, "--json")
        assert doc.returncode == 0, doc.stderr
        items = {item["text"]: item for item in json.loads(doc.stdout)["items"]}
        assert items[old_text]["superseded"] is True
        assert items[old_text]["superseded_by"] == {"document_id": new_id, "text": new_text}
        assert items[new_text]["superseded"] is False and items[new_text]["supersedes"] == [old_id]

    async def test_a_damaged_state_file_costs_the_ledger_marks_not_the_recall(self, world: World) -> None:
        """A state file that is not one (garbage) leaves recall working, marked from the hits only,
        with one warning and no traceback."""
        await conflict(world)
        world.config.state_path.write_bytes(b"not a database" * 100)
        proc = world.dreamer("recall", f"Nextcloud {world.word} version", "--profile", PROFILE)
        assert proc.returncode == 0, proc.stderr
        assert "(superseded)" in proc.stdout
        assert "Traceback" not in proc.stderr and "supersession" in proc.stderr


class TestScopedRetain:
    async def test_scoped_retain_carries_its_tag(self, world: World) -> None:
        """`dreamer retain --scope staging` stores the memory tagged scope:staging (and its --tag)."""
        text = f"Nextcloud {world.word} runs version 29.0 on host atlas-staging."
        proc = world.dreamer(
            "retain", text, "--bank", PROFILE, "--scope", "staging", "--tag", "ops", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        units = await world.backend.list_units_since(world.bank_id(PROFILE), None)
        tagged = [u for u in units if world.word in u.text]
        assert tagged and all({"scope:staging", "ops"} <= set(u.tags) for u in tagged)

    async def test_tool_retain_with_scope_carries_the_tag_and_a_bad_one_sends_nothing(
        self, world: World
    ) -> None:
        """hindsight_retain's scope tags the memory; an invalid scope is a ScopeError and stores nothing."""
        router = BankRouter(world.config, world.backend, profile=PROFILE)
        text = f"Grafana {world.word} listens on port 3001 in staging."
        with pytest.raises(ScopeError):
            await run_tool_call(
                router, "hindsight_retain", {"content": text, "scope": "staging:eu"}, HINDSIGHT_TOOLS
            )
        assert (await world.backend.activity([world.bank_id(PROFILE)]))[
            world.bank_id(PROFILE)
        ].unit_count == 0
        await run_tool_call(
            router, "hindsight_retain", {"content": text, "scope": "staging", "tags": None}, HINDSIGHT_TOOLS
        )
        units = await world.backend.list_units_since(world.bank_id(PROFILE), None)
        assert [u for u in units if world.word in u.text]
        assert all("scope:staging" in u.tags for u in units if world.word in u.text)

    @pytest.mark.parametrize("scope", ["", "prod:eu", "two words", "s" * 65, "\x1b[2Jx"])
    async def test_a_bad_scope_is_refused_before_anything_is_stored(self, world: World, scope: str) -> None:
        """A scope that cannot be a tag is exit 2 with one line naming the rule; nothing is stored."""
        proc = world.dreamer("retain", f"Fact {world.word}.", "--bank", PROFILE, "--scope", scope)
        assert proc.returncode == 2
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("dreamer retain: scope") and "\x1b" not in line
        assert (await world.backend.activity([world.bank_id(PROFILE)]))[
            world.bank_id(PROFILE)
        ].unit_count == 0


@pytest.fixture
async def embedded_world(tmp_path: Path) -> AsyncIterator[World]:
    suffix = uuid.uuid4().hex[:10]
    write_toml(tmp_path / "config.toml", world_config("embedded", tmp_path, suffix))
    config = load_config(tmp_path / "config.toml")
    backend = open_backend(config)
    try:
        yield World("embedded", tmp_path, config, backend, "zq" + suffix)
    finally:
        await backend.aclose()


class TestScopedConflict:
    """A whole roll-up on the embedded store (extractive cards, so the verdicts are known)."""

    async def test_a_scoped_conflict_is_kept_both_and_marks_nothing(self, embedded_world: World) -> None:
        """A 28.0 fact retained --scope staging conflicts with the 27.1 card of a recency_wins profile:
        the roll-up calls it a conflict, promotes it tagged scope:staging without superseding, and
        recall shows both cards unmarked."""
        world = embedded_world
        old_text, new_text = versions(world)
        assert world.dreamer("retain", old_text, "--bank", PROFILE).returncode == 0
        first = world.dreamer("rollup", "--json")
        assert first.returncode == 0, first.stderr
        assert world.dreamer("retain", new_text, "--bank", PROFILE, "--scope", "staging").returncode == 0
        second = world.dreamer("rollup", "--json")
        assert second.returncode == 0, second.stderr

        (report,) = json.loads(second.stdout)["reports"]
        (card,) = report["plan"]
        assert (card["text"], card["verdict"]) == (new_text, "conflict")
        upstream = await world.backend.list_units_since(world.bank_id("global"), None)
        tags = {u.text: set(u.tags) for u in upstream}
        assert "scope:staging" in tags[new_text] and "supersedes" not in tags[new_text]
        assert not any(u.metadata.get("supersedes") for u in upstream)
        with StateStore.open(world.config.state_path) as state:
            assert [c.supersedes for c in state.ledger()] == [None, None]

        recalled = world.dreamer("recall", f"Nextcloud {world.word} version", "--profile", PROFILE, "--json")
        items = {i["text"]: i for i in json.loads(recalled.stdout)["items"]}
        assert items[old_text]["superseded"] is False and items[new_text]["superseded"] is False

    async def test_the_same_conflict_unscoped_supersedes(self, embedded_world: World) -> None:
        """Control: without --scope the same two facts make the 28.0 card supersede the 27.1 one."""
        world = embedded_world
        old_text, new_text = versions(world)
        assert world.dreamer("retain", old_text, "--bank", PROFILE).returncode == 0
        assert world.dreamer("rollup").returncode == 0
        assert world.dreamer("retain", new_text, "--bank", PROFILE).returncode == 0
        assert world.dreamer("rollup").returncode == 0

        recalled = world.dreamer("recall", f"Nextcloud {world.word} version", "--profile", PROFILE, "--json")
        items = {i["text"]: i for i in json.loads(recalled.stdout)["items"]}
        assert items[old_text]["superseded"] is True
        assert items[old_text]["superseded_by"]["text"] == new_text


class TestLedgerQuery:
    def test_superseding_reads_every_chunk(self, tmp_path: Path) -> None:
        """More ids than one SQLite statement takes (chunks of 500) still find every superseding card,
        and ids nobody supersedes find nothing."""
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            rows = [
                LedgerCard(
                    document_id=f"new-{i}",
                    profile=PROFILE,
                    upstream_bank="g",
                    text=f"fact {i}",
                    normalized=f"fact {i}",
                    supersedes=f"old-{i}",
                    promoted_at=T0,
                )
                for i in range(1200)
            ]
            state.record_run_start("r", "rollup:homelab", T0)
            state.commit_rollup(
                profile=PROFILE,
                bank_id="b",
                watermark=Watermark(),
                promoted=rows,
                reinforced=[],
                run_id="r",
                outcome="promoted",
                detail="",
                counts={},
                finished_at=T0,
            )
            found = state.superseding([f"old-{i}" for i in range(1200)] + ["nobody"])
            assert sorted(c.supersedes or "" for c in found) == sorted(f"old-{i}" for i in range(1200))
            assert state.superseding(["new-1", "nobody"]) == []


class TestToldAndRelated:
    """Recall says how often the roll-up found a card's fact (from the ledger) and which stored card
    a card was kept beside (its ``related_to`` metadata, on the hit itself)."""

    async def test_a_reinforced_card_is_shown_with_its_count_and_dates(self, world: World) -> None:
        text = f"Sam {world.word} values Evan's support with his diet."
        document_id = await promote(world, text)
        later = T0 + timedelta(days=40)
        with StateStore.open(world.config.state_path) as state:
            state.record_run_start("run-later", f"rollup:{PROFILE}", later)
            state.commit_rollup(
                profile=PROFILE,
                bank_id=world.bank_id(PROFILE),
                watermark=Watermark(),
                promoted=[],
                reinforced=[Reinforcement(document_id, ("u-later",), PROFILE)],
                run_id="run-later",
                outcome="reinforced",
                detail="",
                counts={},
                finished_at=later,
            )
        proc = world.dreamer("recall", f"Sam {world.word} support", "--profile", PROFILE)
        assert proc.returncode == 0, proc.stderr
        assert f"[global] {text} (seen 2 times, 2026-11-01 to 2026-12-11)" in proc.stdout.splitlines()
        doc = world.dreamer("recall", f"Sam {world.word} support", "--profile", PROFILE, "--json")
        [item] = [i for i in json.loads(doc.stdout)["items"] if world.word in i["text"]]
        assert item["told"]["times"] == 2

    async def test_a_card_kept_beside_another_names_it(self, world: World) -> None:
        first = f"Sam {world.word} has a checkup with his doctor about his weight."
        first_id = await promote(world, first)
        later = f"Sam {world.word} has another health checkup where the doctor warns him."
        plan = CardPlan(later, "event", ("u-9",), card_document_id(PROFILE, later), "new", "")
        facts = RunFacts(
            PROFILE, world.bank_id(PROFILE), world.bank_id("global"), "r9", None, None, "recency_wins"
        )
        item = retain_item(plan, Verdict(VerdictKind.NEW, "near", matched_id=first_id), facts, T0)
        await world.backend.retain(world.bank_id("global"), [item])
        with StateStore.open(world.config.state_path) as ledger:
            answer = await BankRouter(world.config, world.backend, profile=PROFILE, ledger=ledger).recall(
                f"Sam {world.word} checkup", banks=["global"]
            )
        linked = {h.text: h.related for h in hits(answer, world.word)}
        assert linked == {first: (), later: (first_id,)}
        assert f"[global] {later} (related: {first_id})" in answer.render().splitlines()
