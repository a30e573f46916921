"""A roll-up on a state file and a global bank written under the previous normalisation rule (rule
1, which dropped a number's sign): its cards keep the ids they were promoted under, and a text that
rule normalised alike with one of them neither replaces that card nor is promoted twice."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config
from dreamer.rollup.pipeline import Rollup
from dreamer.state import LedgerCard, StateStore
from tests.support.configs import config_data, loaded
from tests.support.ledger import commit_run

CONFIG = config_data(
    {"global": {}, "shared": {}, "research": {"access": "read_write"}},
    ("research",),
    state_dir="state",
    slot={"acquire_timeout_s": 2},
)

NEGATIVE = "The UTC offset of the office is -5 hours."
POSITIVE = "The UTC offset of the office is 5 hours."
# What rule 1 made of NEGATIVE: the sign dropped, so also POSITIVE's normalised text.
RULE_1_NORMALIZED = "the utc offset of the office is 5 hours"
RULE_1_ID = "rollup:research:" + hashlib.sha256(f"research\n{RULE_1_NORMALIZED}".encode()).hexdigest()[:32]
AT = datetime(2024, 1, 1, tzinfo=UTC)


async def _retain(cfg: Config, bank: str, items: list[RetainItem]) -> None:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        await backend.retain(cfg.bank_id(bank), items)
    finally:
        await backend.aclose()


async def _run(cfg: Config) -> Any:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state:
            return await Rollup(cfg, backend, state).run("research")
    finally:
        await backend.aclose()


async def _global_cards(cfg: Config) -> list[Any]:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        return await backend.all_units(cfg.bank_id("global"))
    finally:
        await backend.aclose()


async def _promoted_under_rule_1(tmp_path: Path, *, in_ledger: bool = True) -> Config:
    """NEGATIVE promoted upstream under its rule-1 id and, unless ``in_ledger`` is False (a run
    that crashed before its commit), in the ledger with a rule-1 sketch and index version."""
    cfg = loaded(tmp_path, CONFIG)
    await _retain(
        cfg,
        "global",
        [RetainItem(content=NEGATIVE, tags=("rollup", "src:research"), document_id=RULE_1_ID, timestamp=AT)],
    )
    if in_ledger:
        with StateStore.open(cfg.state_path) as state:
            state.use_index_version("s1")
            row = LedgerCard(
                document_id=RULE_1_ID,
                profile="research",
                upstream_bank=cfg.bank_id("global"),
                text=NEGATIVE,
                normalized=RULE_1_NORMALIZED,
                promoted_at=AT,
                last_seen_at=AT,
                run_id="rule-1",
                sketch=f"s1\t{RULE_1_NORMALIZED}\t5 hour offic offset utc\thour offic offset utc",
            )
            # Another profile's run, so that research's watermark stays unset.
            commit_run(state, [row], run_id="rule-1", profile="earlier", at=AT)
    return cfg


async def test_a_text_rule_1_normalised_alike_is_promoted_beside_the_old_card(tmp_path: Path) -> None:
    """POSITIVE once had NEGATIVE's id: now it is a conflict promoted under an id of its own, and
    NEGATIVE stays upstream and in the ledger, under its old id."""
    cfg = await _promoted_under_rule_1(tmp_path)
    await _retain(cfg, "research", [RetainItem(content=POSITIVE)])
    report = await _run(cfg)
    assert (report.promoted, report.conflicts) == (1, 1), [p.to_json() for p in report.plan]
    (plan,) = report.plan
    assert plan.matched_id == RULE_1_ID and plan.document_id != RULE_1_ID
    upstream = {card.text: card.document_id for card in await _global_cards(cfg)}
    assert upstream == {NEGATIVE: RULE_1_ID, POSITIVE: plan.document_id}
    with StateStore.open(cfg.state_path) as state:
        ledger = {card.text: card.document_id for card in state.ledger(cfg.bank_id("global"))}
    assert ledger == upstream


async def test_the_same_text_again_reinforces_the_old_card(tmp_path: Path) -> None:
    """NEGATIVE drafted again gets a new id, yet is a duplicate of its ledger card (the ledger is
    compared by text): reinforced, not promoted a second time."""
    cfg = await _promoted_under_rule_1(tmp_path)
    await _retain(cfg, "research", [RetainItem(content=NEGATIVE)])
    report = await _run(cfg)
    assert (report.promoted, report.reinforced) == (0, 1), [p.to_json() for p in report.plan]
    assert report.plan[0].matched_id == RULE_1_ID
    assert [card.document_id for card in await _global_cards(cfg)] == [RULE_1_ID]
    with StateStore.open(cfg.state_path) as state:
        (card,) = state.ledger(cfg.bank_id("global"))
    assert card.document_id == RULE_1_ID and card.reinforcements == 1


async def test_an_uncommitted_card_of_rule_1_is_not_promoted_again(tmp_path: Path) -> None:
    """A card promoted under rule 1 by a run that crashed before its commit: drafted again, it
    is a duplicate of the upstream card and adds no second copy (the ledger does not learn it:
    its id is not the one the draft gets now)."""
    cfg = await _promoted_under_rule_1(tmp_path, in_ledger=False)
    await _retain(cfg, "research", [RetainItem(content=NEGATIVE)])
    report = await _run(cfg)
    assert report.promoted == 0, [p.to_json() for p in report.plan]
    assert [p.verdict for p in report.plan] == ["duplicate"]
    assert [card.document_id for card in await _global_cards(cfg)] == [RULE_1_ID]
