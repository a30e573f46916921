"""``dreamer state reembed`` on real files with the real local model: after a model change (the
stored vectors rewritten to another model's id, as a model upgrade leaves them), every ledger card
and every unit of the embedded store gets a vector of the configured model, a batch at a time, each
embedded once; running it again embeds nothing; an embedder failing partway keeps what was stored
and the next run goes on; two at once leave what one does; no embedder configured is a
configuration error naming the key."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.commands.reembed import ReembedError, reembed_command
from dreamer.config import Config, load_config
from dreamer.embeddings import factory
from dreamer.service.runner import run_rollups_now
from tests.support.cli import run_dreamer
from tests.support.configs import config_data, write_toml
from tests.support.embedding_model import local_embedder

OLD_MODEL = "local:an-older-model:000000000000"
TEXTS = [
    "Nextcloud runs version 27.1 on host atlas behind nginx.",
    "The nightly restic backup of host atlas runs at 02:30 to the NAS.",
    "Grafana listens on port 3000 on host hermes-mon.",
    "Jellyfin serves the media library from the NAS on port 8096.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie paints sunsets over the lake on weekends.",
    "The homelab UPS gives the rack twelve minutes on battery.",
]


def configured(tmp_path: Path, provider: str = "local") -> tuple[Config, Path]:
    local_embedder()  # skip without the model (fail under DREAMER_REQUIRE_EMBED=1)
    data = config_data(
        {"global": {}, "shared": {}, "homelab": {"access": "read_write"}},
        ("homelab",),
        state_dir=str(tmp_path / "state"),
        embeddings={"provider": provider},
    )
    path = write_toml(tmp_path / "config.toml", data)
    return load_config(path), path


async def filled(config: Config) -> None:
    """Units in the profile bank (with vectors), rolled up into ledger cards (with vectors)."""
    backend = EmbeddedBackend(config.embedded_path, embedder=local_embedder())
    try:
        bank = config.profile_bank_id("homelab")
        await backend.retain(
            bank, [RetainItem(content=t, document_id=f"doc-{i}") for i, t in enumerate(TEXTS)]
        )
    finally:
        await backend.aclose()
    (report,) = await run_rollups_now(config, ["homelab"])
    assert report.outcome == "promoted", report.reason


def models(config: Config) -> tuple[dict[str, int], dict[str, int]]:
    """How many ledger vectors and store vectors each model has."""
    with sqlite3.connect(config.state_path) as state, sqlite3.connect(config.embedded_path) as store:
        ledger = dict(state.execute("SELECT model_id, count(*) FROM ledger_vectors GROUP BY 1").fetchall())
        units = dict(store.execute("SELECT model_id, count(*) FROM unit_vectors GROUP BY 1").fetchall())
    return ledger, units


def change_model(config: Config) -> None:
    with sqlite3.connect(config.state_path) as state, sqlite3.connect(config.embedded_path) as store:
        state.execute("UPDATE ledger_vectors SET model_id = ?", (OLD_MODEL,))
        store.execute("UPDATE unit_vectors SET model_id = ?", (OLD_MODEL,))


def counts(config: Config) -> tuple[int, int]:
    with sqlite3.connect(config.state_path) as state, sqlite3.connect(config.embedded_path) as store:
        return (
            state.execute("SELECT count(*) FROM ledger").fetchone()[0],
            store.execute("SELECT count(*) FROM units").fetchone()[0],
        )


def reembed(config: Config, batch: int = 3) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = anyio.run(
        lambda: reembed_command(config, "config.toml", batch=batch, as_json=True, out=out, err=err)
    )
    assert code == 0, err.getvalue()
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


class Spy:
    """The configured embedder, counting the texts it is asked for; with ``fail_after``, failing
    (a fault injected around the real model, which cannot be made to fail on cue) from that call on."""

    def __init__(self, inner: Any, fail_after: int | None = None) -> None:
        self.inner, self.fail_after, self.calls, self.texts = inner, fail_after, 0, 0
        self.model_id = inner.model_id

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension  # type: ignore[no-any-return]

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ConnectionError("the embedder went away")
        self.texts += len(texts)
        return await self.inner.embed(texts)

    async def aclose(self) -> None:
        await self.inner.aclose()


def spying(monkeypatch: pytest.MonkeyPatch, fail_after: int | None = None) -> list[Spy]:
    made: list[Spy] = []
    real = factory.make_embedder

    def make(config: Config) -> Spy:
        spy = Spy(real(config), fail_after)
        made.append(spy)
        return spy

    monkeypatch.setattr(factory, "make_embedder", make)
    return made


class Changed(NamedTuple):
    """A filled state and store whose vectors a model change left to another model."""

    config: Config
    path: Path
    cards: int
    units: int


@pytest.fixture
def changed(tmp_path: Path) -> Changed:
    config, path = configured(tmp_path)
    anyio.run(filled, config)
    cards, units = counts(config)
    assert cards >= 5 and units == len(TEXTS) + cards  # the cards were promoted into the global bank
    change_model(config)
    return Changed(config, path, cards, units)


def test_after_a_model_change_every_card_and_unit_gets_a_vector_once(
    changed: Changed, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _, cards, units = changed
    made = spying(monkeypatch)
    doc = reembed(config)
    assert doc["ledger_cards"] == cards
    assert sum(doc["store_units"].values()) == units
    ledger, stored = models(config)
    assert ledger == {doc["model_id"]: cards}, "a card's vector is replaced"
    assert stored == {OLD_MODEL: units, doc["model_id"]: units}, "a unit's of another model stays beside it"
    assert made[0].texts == 1 + cards + units, "each card and unit embedded once (and the probe)"
    again = reembed(config)
    assert again["ledger_cards"] == 0 and sum(again["store_units"].values()) == 0


def test_an_embedder_failing_partway_keeps_what_was_stored_and_the_next_run_goes_on(
    changed: Changed, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, path, cards, units = changed
    spying(monkeypatch, fail_after=3)  # the probe and two batches of the ledger
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(ReembedError, match=r"failed in the ledger.*run `dreamer state reembed` again"):
        anyio.run(lambda: reembed_command(config, "config.toml", batch=2, as_json=True, out=out, err=err))
    ledger, _ = models(config)
    current = next(m for m in ledger if m != OLD_MODEL)
    assert ledger[current] == 4
    hint = "`dreamer state reembed` embeds the rest now"
    assert hint in run_dreamer(path, "status").stdout, "two models' vectors: status says what to do"
    monkeypatch.undo()
    doc = reembed(config, batch=2)
    assert doc["ledger_cards"] == cards - 4 and sum(doc["store_units"].values()) == units
    assert hint not in run_dreamer(path, "status").stdout


def test_the_command_line_prints_json_and_refuses_without_an_embedder(
    changed: Changed, tmp_path: Path
) -> None:
    _, path, cards, _ = changed
    done = run_dreamer(path, "state", "reembed", "--json", "--batch", "4")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ledger_cards"] == cards
    text = run_dreamer(path, "state", "reembed")
    assert text.returncode == 0 and "ledger cards embedded: 0" in text.stdout
    _, none_path = configured(tmp_path / "none", provider="none")
    refused = run_dreamer(none_path, "state", "reembed")
    assert refused.returncode == 78 and f"{none_path}: embeddings.provider" in refused.stderr
    assert "Traceback" not in refused.stderr + done.stderr + text.stderr
    bad = run_dreamer(path, "state", "reembed", "--batch", "0")
    assert bad.returncode == 2 and "at least 1" in bad.stderr


def test_two_at_once_leave_every_card_and_unit_one_vector_of_the_model(changed: Changed) -> None:
    """Two ``dreamer state reembed`` processes on the same files at once (an operator's and a
    timer's): both finish, and every card and unit ends with exactly one vector of the configured
    model, the other model's units' vectors kept beside, as after one. Each card is embedded by at
    least one of them (a batch both read is written twice, the same vectors: an upsert)."""
    config, path, cards, units = changed
    with ThreadPoolExecutor(2) as pool:
        runs = list(
            pool.map(lambda _: run_dreamer(path, "state", "reembed", "--json", "--batch", "2"), range(2))
        )
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    docs = [json.loads(run.stdout) for run in runs]
    model = docs[0]["model_id"]
    assert models(config) == ({model: cards}, {OLD_MODEL: units, model: units})
    assert cards <= sum(doc["ledger_cards"] for doc in docs) <= 2 * cards
    assert all("Traceback" not in run.stderr for run in runs)
    with sqlite3.connect(config.state_path) as state:
        assert state.execute("SELECT count(DISTINCT document_id) FROM ledger_vectors").fetchone()[0] == cards
    again = reembed(config)
    assert again["ledger_cards"] == 0 and sum(again["store_units"].values()) == 0
