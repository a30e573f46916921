"""The body of ``dreamer state copy``: the SQLite state file copied into the PostgreSQL schema that
``[state]`` names, then compared with it (:mod:`dreamer.state.copy`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from dreamer.commands.output import emit
from dreamer.config import Config
from dreamer.errors import ConfigError, ExitCode
from dreamer.jobs.open import open_state
from dreamer.state.copy import BATCH_ROWS, CopyReport, copy_state, open_source

__all__ = ["copy_command", "format_report"]


def copy_command(
    config: Config,
    config_file: Path,
    *,
    source: Path | None,
    as_json: bool,
    batch_rows: int = BATCH_ROWS,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Copy ``source`` (default: the configured ``<state_dir>/state.sqlite3``) into the configured
    PostgreSQL state and print the comparison; exit 1 when the two sides differ."""
    if config.state.backend != "postgres":
        raise ConfigError(
            f"{config_file}: state.backend: is {config.state.backend!r}, and `dreamer state copy` copies "
            'into PostgreSQL; set [state] backend = "postgres" with its dsn (and schema) first'
        )
    path = source if source is not None else config.state_path
    ticker = Ticker(err)

    def upgrading(line: str) -> None:
        print(line, file=err, flush=True)

    with open_source(path, on_upgrade=upgrading) as sqlite, open_state(config) as target:
        report = copy_state(sqlite, target, source_path=path, batch_rows=batch_rows, progress=ticker)
    if as_json:
        emit(report.to_json(), True, out)
    else:
        out.write(format_report(report))
    if not report.ok:
        print(
            f"dreamer state copy: {report.target} differs from {path} in: {', '.join(report.differing)}; "
            "it holds an earlier copy or changes of its own (a daemon still writing to the file or to "
            "the schema). Stop the daemons and copy into a new schema ([state] schema)",
            file=err,
        )
        return ExitCode.FAILED
    return ExitCode.OK


class Ticker:
    """Progress on stderr for a table that takes longer than ``every_s``: a line each ``every_s``
    while it is copied, and one at its end."""

    def __init__(self, err: TextIO, *, every_s: float = 1.0) -> None:
        self._err = err
        self._every_s = every_s
        self._table = ""
        self._shown = False
        self._last = 0.0

    def __call__(self, table: str, done: int, total: int) -> None:
        now = time.monotonic()
        if table != self._table:
            self._table, self._shown, self._last = table, False, now
        if done < total and now - self._last >= self._every_s:
            self._shown, self._last = True, now
        elif not (done >= total and self._shown):
            return
        print(f"  {table}: {done:,} / {total:,} rows", file=self._err, flush=True)


def format_report(report: CopyReport) -> str:
    """The comparison for people: one line per table and checksum, then the verdict."""
    lines = [f"copied {report.source} into {report.target} in {report.seconds:.1f} s", ""]
    lines.append(f"{'table':<20} {'sqlite':>16} {'postgres':>16} {'new':>10}  ok")
    for check in report.checks:
        new = "" if check.new is None else f"{check.new:,}"
        lines.append(
            f"{check.name:<20} {_value(check.sqlite):>16} {_value(check.postgres):>16} {new:>10}  "
            f"{'ok' if check.ok else 'DIFFERS'}"
        )
    lines.append("")
    lines.append(
        "the PostgreSQL state matches the file: start the daemons on it"
        if report.ok
        else f"the PostgreSQL state differs from the file in: {', '.join(report.differing)}"
    )
    return "\n".join(lines) + "\n"


def _value(value: int | str) -> str:
    return f"{value:,}" if isinstance(value, int) else value
