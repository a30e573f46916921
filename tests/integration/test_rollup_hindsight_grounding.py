"""Grounding on the reflect path of a real Hindsight server: its structured answer scripted in the
LLM stub to misbehave (cite without saying, fuse two values, invent a detail, cite an unknown id,
answer cut JSON). After the run every unit is held by the cards citing it, and the report counts
what happened. Needs ``scripts/hindsight-dev up``; skipped without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dreamer.backends.base import RetainItem
from dreamer.config import Config
from tests.hindsight_fixtures import LLMStub
from tests.integration.test_rollup_hindsight import (
    FACT_TYPES,
    PROFILE,
    assert_held,
    config_data,
    opened,
    run_once,
)
from tests.support import configs

pytestmark = [pytest.mark.hindsight]


def facts(marker: str) -> list[str]:
    return [
        f"Server h1b36 of {marker} has address 10.0.0.36 and 108 GB of disk.",
        f"Server h1b99 of {marker} has address 10.0.0.99 and 297 GB of disk.",
        f"The restic backup job of {marker} runs at 02:30.",
        f"The restic backup job of {marker} runs at 03:30.",
        f"Sam of {marker} does not like green tea.",
    ]


#: A word only one fact holds, to find its unit by.
KEYS = ("h1b36", "h1b99", "02:30", "03:30", "green tea")


async def seed_units(cfg: Config, marker: str) -> dict[str, str]:
    """Retain each fact as its own document; the stored units' ids by the key word of their fact."""
    bank_id = cfg.bank_id(PROFILE)
    async with opened(cfg) as backend:
        await backend.retain(
            bank_id, [RetainItem(content=t, document_id=f"{marker}-{i}") for i, t in enumerate(facts(marker))]
        )
        units = await backend.list_units_since(bank_id, None, fact_types=FACT_TYPES)
    ids: dict[str, str] = {}
    for key in KEYS:
        found = [u.id for u in units if key in u.text]
        assert len(found) == 1, f"{len(found)} units hold {key!r}: {[u.text for u in units]}"
        ids[key] = found[0]
    return ids


def answer(*cards: tuple[str, list[str]]) -> str:
    return json.dumps({"cards": [{"text": t, "kind": "fact", "source_ids": i} for t, i in cards]})


class TestReflectGrounding:
    async def test_a_misbehaving_answer_loses_no_unit(
        self, tmp_path: Path, server: str, fresh_bank_id: str, llm_stub: LLMStub
    ) -> None:
        """Cites two servers and says one, fuses two backup times, invents a year, cites an id of
        no unit: the said cards stand, the others are rejected, every unit is held."""
        cfg = configs.loaded(tmp_path, config_data(server, fresh_bank_id))
        ids = await seed_units(cfg, fresh_bank_id)
        h36, h99, b1, b2, tea = (ids[key] for key in KEYS)
        m = fresh_bank_id
        llm_stub.script(
            match=m,
            kind="structured",
            content=answer(
                (f"Server h1b36 of {m} has address 10.0.0.36 and 108 GB of disk.", [h36, h99]),
                (f"The restic backup job of {m} runs at 02:30 or 03:30.", [b1, b2]),
                (f"Sam of {m} has not liked green tea since 2019.", [tea]),
                (f"Server h1b36 of {m} has 108 GB of disk at 10.0.0.36.", ["no-such-unit"]),
            ),
        )
        async with opened(cfg) as backend:
            report = await run_once(cfg, backend)
        assert report.outcome == "promoted", report.reason
        assert report.summariser == "reflect"
        assert report.cards_rejected == {"fused": 1, "invented": 1}, report.rejections
        assert report.cards_accepted == 2 and report.units_recarded == 4
        assert report.llm_calls == 1 and report.llm_tokens > 0
        held = await assert_held(cfg)
        assert {h36, h99, b1, b2, tea} <= held

    async def test_a_cut_answer_is_carded_extractively(
        self, tmp_path: Path, server: str, fresh_bank_id: str, llm_stub: LLMStub
    ) -> None:
        """Structured output cut mid-JSON: no model card, every unit carded from its own text."""
        cfg = configs.loaded(tmp_path, config_data(server, fresh_bank_id))
        ids = await seed_units(cfg, fresh_bank_id)
        cut = answer((f"Server h1b36 of {fresh_bank_id} has address", list(ids.values())))[:60]
        llm_stub.script(match=fresh_bank_id, kind="structured", content=cut, finish_reason="length")
        async with opened(cfg) as backend:
            report = await run_once(cfg, backend)
        assert report.outcome == "promoted", report.reason
        assert report.cards_accepted == 0
        assert set(ids.values()) <= await assert_held(cfg)
