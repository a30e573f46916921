"""The state's upkeep once a run has finished (`dreamer.jobs.upkeep`), on real state files: the
checkpoint, and older ledger rows given the stored sketch this code writes, in bounded batches."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dreamer.config import Config
from dreamer.jobs.open import open_state
from dreamer.jobs.upkeep import after_run, checkpoint_state, upgrade_ledger
from dreamer.rollup.existing import stored_sketch
from dreamer.rollup.judging import SKETCH_UPGRADE
from dreamer.state import StateStore
from tests.support.configs import config_data, loaded
from tests.support.ledger import commit_run, sketched_row
from tests.support.logs import json_logs

TEXTS = [
    f"Sam adopted beagle number {i} on {i % 28 + 1} May.  It sleeps in the {w} room." if i % 2 else
    f"Ana runs Nextcloud {i} behind nginx on host atlas-{w}."
    for i, w in enumerate(["north", "south", "east", "west", "top", "low"] * 4)
]


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    with json_logs() as out:
        yield out


def records(logs: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in logs.getvalue().splitlines() if line.startswith("{")]


def seeded(tmp_path: Path, *, fields: int) -> Config:
    """A state whose ledger holds `TEXTS`, each row's stored sketch cut to its first ``fields``
    fields (4: written before sentences' sketches were kept, 5: before analyses were), every third
    row as this code writes it."""
    config = loaded(tmp_path, config_data(state_dir=str(tmp_path / "state")))
    rows = [sketched_row(text, i) for i, text in enumerate(TEXTS)]
    with open_state(config) as state:
        commit_run(state, rows)
    with closing(sqlite3.connect(config.state_path)) as conn, conn:
        for i, row in enumerate(rows):
            if i % 3:
                older = "\t".join(str(row.sketch).split("\t")[:fields])
                conn.execute("UPDATE ledger SET sketch = ? WHERE document_id = ?", (older, row.document_id))
    return config


def sketches(config: Config) -> dict[str, str]:
    with closing(sqlite3.connect(config.state_path)) as conn:
        return {text: sketch for text, sketch in conn.execute("SELECT text, sketch FROM ledger")}


class TestUpgrade:
    @pytest.mark.parametrize("fields", [4, 5])
    async def test_older_rows_get_the_stored_sketch_this_code_writes(
        self, tmp_path: Path, logs: io.StringIO, fields: int
    ) -> None:
        """Every row ends as `stored_sketch` writes it (the sentences' sketches and the analysis);
        the rows already so are not counted; it says how many it upgraded, and that it is done."""
        config = seeded(tmp_path, fields=fields)
        await upgrade_ledger(config, batch=5, batches=100)
        assert sketches(config) == {text: stored_sketch(text).dumps() for text in TEXTS}
        said = [r for r in records(logs) if r["event"] == "ledger cards given their analyses"]
        assert len(said) == 1 and said[0]["cards"] == 16 and said[0]["done"] is True

    async def test_one_call_does_a_bounded_batch_and_the_next_goes_on(self, tmp_path: Path) -> None:
        """Two batches of five rows a call (in document-id order): the first call leaves the rest
        as they were, the later ones go on from where it stopped, and once done nothing is read."""
        config = seeded(tmp_path, fields=5)
        await upgrade_ledger(config, batch=5, batches=2)
        with closing(sqlite3.connect(config.state_path)) as conn:
            ordered = [text for (text,) in conn.execute("SELECT text FROM ledger ORDER BY document_id")]
        now = sketches(config)
        assert all(now[t] == stored_sketch(t).dumps() for t in ordered[:10])
        assert sum(now[t] != stored_sketch(t).dumps() for t in ordered[10:]) > 0
        for _ in range(3):
            await upgrade_ledger(config, batch=5, batches=2)
        assert sketches(config) == {text: stored_sketch(text).dumps() for text in TEXTS}
        with open_state(config) as state:
            assert state.sketch_upgrade(5, SKETCH_UPGRADE) is None

    async def test_a_row_that_does_not_read_is_left_as_it_is(self, tmp_path: Path) -> None:
        """A damaged sketch (or one of another sketch version) is sketched from its text when the
        judge meets it, as before: the upgrade does not touch it."""
        config = seeded(tmp_path, fields=5)
        with closing(sqlite3.connect(config.state_path)) as conn, conn:
            conn.execute("UPDATE ledger SET sketch = 'garbage' WHERE text = ?", (TEXTS[1],))
        await upgrade_ledger(config, batch=100, batches=1)
        assert sketches(config)[TEXTS[1]] == "garbage"

    async def test_another_version_or_a_damaged_cursor_goes_over_every_row_again(
        self, tmp_path: Path
    ) -> None:
        config = seeded(tmp_path, fields=5)
        await upgrade_ledger(config, batch=100, batches=1)
        with closing(sqlite3.connect(config.state_path)) as conn, conn:
            conn.execute("UPDATE meta SET value = 's3/a0' WHERE key = 'sketch_upgrade_done'")
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('sketch_upgrade_after', '[1, 2, 3') "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
            )
        with open_state(config) as state:
            again = state.sketch_upgrade(100, SKETCH_UPGRADE)
        assert again is not None and len(again) == len(TEXTS)

    async def test_once_done_the_state_is_not_opened_again_after_each_run(
        self, tmp_path: Path, logs: io.StringIO
    ) -> None:
        """A daemon of many idle profiles would open its state after every run for nothing: once
        this process found every row upgraded, it does not look again (garbage put in the file's
        place afterwards is not even read)."""
        config = seeded(tmp_path, fields=5)
        await upgrade_ledger(config)
        config.state_path.unlink()
        config.state_path.write_bytes(b"not a database" * 512)
        await upgrade_ledger(config)
        assert not [r for r in records(logs) if r["level"] == "warning"]

    async def test_a_state_that_fails_is_a_warning(self, tmp_path: Path, logs: io.StringIO) -> None:
        """Garbage where the state file was: the rows keep what they had, the run is not failed."""
        config = seeded(tmp_path, fields=5)
        config.state_path.unlink()
        config.state_path.write_bytes(b"not a database" * 512)
        await upgrade_ledger(config)
        said = records(logs)[-1]
        assert said["event"] == "could not upgrade the ledger's older cards" and said["level"] == "warning"


    async def test_a_state_removed_since_the_run_is_not_created_again(
        self, tmp_path: Path, logs: io.StringIO
    ) -> None:
        """The state file removed between a run and its upkeep (the daemon then runs no more until
        it is back): the upkeep says it could not upgrade, and creates nothing at the path, so the
        daemon's next check still finds the file removed, not replaced by a new, empty one."""
        config = seeded(tmp_path, fields=4)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{config.state_path}{suffix}").unlink(missing_ok=True)
        await upgrade_ledger(config)
        said = records(logs)[-1]
        assert said["event"] == "could not upgrade the ledger's older cards" and said["level"] == "warning"
        assert "not there" in said["error"]
        assert sorted(p.name for p in config.state_path.parent.iterdir()) == []


class TestCheckpoint:
    async def test_it_writes_the_log_back_and_says_what_it_wrote(
        self, logs: io.StringIO, tmp_path: Path
    ) -> None:
        with StateStore.open(tmp_path / "state.sqlite3") as store:
            store.defer_checkpoints()
            store.record_run_start("r1", "rollup:research", datetime.now(UTC))
            await checkpoint_state(store)
        record = next(r for r in records(logs) if "checkpointed" in r["event"])
        assert record["event"] == "state file checkpointed"
        assert record["pages"] > 0 and record["seconds"] >= 0

    async def test_a_checkpoint_that_fails_is_a_warning_not_an_error(
        self, logs: io.StringIO, tmp_path: Path
    ) -> None:
        """The file removed under the open store: the warning names it, the run is not failed."""
        with StateStore.open(tmp_path / "state.sqlite3") as store:
            (tmp_path / "state.sqlite3").unlink()
            await checkpoint_state(store)
        record = records(logs)[-1]
        assert record["event"] == "could not checkpoint the state file"
        assert record["level"] == "warning" and "state.sqlite3" in record["error"]

    async def test_without_a_state_the_daemon_holds_there_is_no_upkeep(
        self, logs: io.StringIO, tmp_path: Path
    ) -> None:
        """No recorder (the state did not open), or one that is not the state: nothing is opened,
        created or logged."""
        config = loaded(tmp_path, config_data(state_dir=str(tmp_path / "state")))
        await after_run(config, None)
        await after_run(config, object())
        assert not config.state_path.exists() and not logs.getvalue()
