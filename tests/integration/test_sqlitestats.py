"""SQLite's memory statistics turned off at start, on the real library in fresh processes (the
setting is process-wide and the test process has connections open).

Whether they are on is read from the library itself: with them on, ``sqlite3_memory_used()``
counts what an open connection holds; with them off it says 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dreamer import sqlitestats

REPO_ROOT = Path(__file__).resolve().parents[2]

_PRELUDE = """
import ctypes, json, sqlite3, _sqlite3
from dreamer.sqlitestats import stop_memory_statistics
lib = ctypes.CDLL(_sqlite3.__file__)
lib.sqlite3_memory_used.restype = ctypes.c_int64
def counted():
    return lib.sqlite3_memory_used()
"""


def _run(body: str, tmp_path: Path) -> dict[str, object]:
    script = _PRELUDE + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="turned off on Linux only")
def test_at_start_they_are_turned_off_and_every_connection_works_as_before(tmp_path: Path) -> None:
    answer = _run(
        f"""
        outcome = stop_memory_statistics()
        conn = sqlite3.connect({str(tmp_path / "a.sqlite3")!r})
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(f"word{{i}} common",) for i in range(500)])
        rows = conn.execute("SELECT count(*) FROM t WHERE t MATCH 'common'").fetchone()[0]
        print(json.dumps({{"outcome": outcome, "again": stop_memory_statistics(), "counted": counted(),
                          "rows": rows}}))
        """,
        tmp_path,
    )
    assert answer == {"outcome": "off", "again": "off", "counted": 0, "rows": 500}


def test_with_a_connection_open_they_are_left_on_and_the_connection_is_untouched(tmp_path: Path) -> None:
    """SQLite may not be shut down with a connection open: the call leaves everything as it was."""
    answer = _run(
        f"""
        conn = sqlite3.connect({str(tmp_path / "a.sqlite3")!r})
        conn.execute("CREATE TABLE t (x)")
        outcome = stop_memory_statistics()
        conn.execute("INSERT INTO t VALUES (1)")
        print(json.dumps({{"outcome": outcome, "counted": counted() > 0,
                          "rows": conn.execute("SELECT count(*) FROM t").fetchone()[0]}}))
        """,
        tmp_path,
    )
    expected = "left on: SQLite was already in use in this process"
    if not sys.platform.startswith("linux"):
        expected = f"left on: not tried on {sys.platform}"
    assert answer == {"outcome": expected, "counted": True, "rows": 1}


def test_the_command_line_turns_them_off_before_its_command_runs(tmp_path: Path) -> None:
    """``dreamer`` says at debug level what it did (a command that opens no store is enough)."""
    done = subprocess.run(
        [sys.executable, "-m", "dreamer", "check-config", "--config", str(tmp_path / "missing.toml"),
         "--log-level", "debug", "--log-format", "json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    said = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    statistics = [line["statistics"] for line in said if line["event"] == "SQLite's memory statistics"]
    off = "off" if sys.platform.startswith("linux") else f"left on: not tried on {sys.platform}"
    assert statistics == [off]


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("platform", "left on: not tried on darwin"),
        ("library", "left on: the SQLite library's functions are not reachable (no such library)"),
    ],
)
def test_where_it_cannot_be_done_they_are_left_on_with_the_reason(
    fault: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another platform, or a library whose functions ctypes cannot find: nothing is called."""

    def unreachable(*_args: object, **_kwargs: object) -> object:
        raise OSError("no such library")

    monkeypatch.setattr(sqlitestats, "_outcome", None)
    if fault == "platform":
        monkeypatch.setattr(sqlitestats.sys, "platform", "darwin")
    monkeypatch.setattr(sqlitestats.ctypes, "CDLL", unreachable)
    assert sqlitestats.stop_memory_statistics() == said
    assert sqlitestats.stop_memory_statistics() == said  # once per process: not tried again
