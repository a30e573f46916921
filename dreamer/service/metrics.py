"""Operator metrics as a Prometheus text file, for node_exporter's textfile collector.

:func:`render` is pure: the run records' totals and each profile's latest run in, the text format
out. :func:`write_textfile` replaces the file atomically (a temporary file in the same directory,
fsync, rename), so the collector never reads half a file. Counters come from the state file's run
records, so they survive restarts and agree with ``dreamer status``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dreamer.jobs.spec import rollup_job_id
from dreamer.outcomes import COMMITTED
from dreamer.state import RunTotal, StateStore


@dataclass(frozen=True, slots=True)
class ProfileNow:
    """Where one profile's roll-up stands: deferrals in a row up to its latest run, and the backlog
    its latest run saw (None when no run has counted it yet)."""

    profile: str
    deferred_in_a_row: int
    backlog: int | None


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _line(name: str, labels: Mapping[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    number = repr(float(value)) if not float(value).is_integer() else str(int(value))
    return f"{name}{{{inner}}} {number}" if inner else f"{name} {number}"


def _family(name: str, kind: str, help_text: str, lines: Iterable[str]) -> list[str]:
    body = list(lines)
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *body] if body else []


#: Counters summed from the run records per profile: (metric, run count, help).
_SUMMED = (
    (
        "dreamer_llm_tokens_total",
        "llm_tokens",
        "LLM tokens (prompt and completion) a profile's roll-ups used.",
    ),
    (
        "dreamer_cards_accepted_total",
        "cards_accepted",
        "Summariser cards that held every unit they cited (grounding).",
    ),
    (
        "dreamer_cards_rejected_total",
        "cards_rejected",
        "Summariser cards rejected by grounding (invented detail, holds none, fused values, too long).",
    ),
    (
        "dreamer_units_recarded_total",
        "units_recarded",
        "Units a summariser card cited without saying their facts, carded again.",
    ),
)


def render(totals: Sequence[RunTotal], profiles: Sequence[ProfileNow], ledger_cards: int) -> str:
    """The metrics in Prometheus' text exposition format (ends with a newline)."""
    rollups = [t for t in totals if t.job_id.startswith("rollup:")]
    last_success: dict[str, float] = {}
    for t in rollups:
        if t.outcome in COMMITTED and t.last_finished_at is not None:
            profile = t.job_id.split(":", 1)[1]
            last_success[profile] = max(last_success.get(profile, 0.0), t.last_finished_at.timestamp())
    promoted: dict[str, int] = {}
    reinforced: dict[str, int] = {}
    for t in rollups:
        profile = t.job_id.split(":", 1)[1]
        promoted[profile] = promoted.get(profile, 0) + t.promoted
        reinforced[profile] = reinforced.get(profile, 0) + t.reinforced
    out: list[str] = []
    out += _family(
        "dreamer_runs_total",
        "counter",
        "Finished runs by job and outcome.",
        (_line("dreamer_runs_total", {"job_id": t.job_id, "outcome": t.outcome}, t.runs) for t in totals),
    )
    out += _family(
        "dreamer_cards_promoted_total",
        "counter",
        "Cards promoted upstream by a profile's roll-ups.",
        (_line("dreamer_cards_promoted_total", {"profile": p}, n) for p, n in sorted(promoted.items())),
    )
    out += _family(
        "dreamer_cards_reinforced_total",
        "counter",
        "Cards a profile's roll-ups found again (duplicates that reinforced a card).",
        (_line("dreamer_cards_reinforced_total", {"profile": p}, n) for p, n in sorted(reinforced.items())),
    )
    for name, count, help_text in _SUMMED:
        per_profile: dict[str, int] = {}
        for t in rollups:
            profile = t.job_id.split(":", 1)[1]
            per_profile[profile] = per_profile.get(profile, 0) + t.sums.get(count, 0)
        out += _family(
            name,
            "counter",
            help_text,
            (_line(name, {"profile": p}, n) for p, n in sorted(per_profile.items())),
        )
    out += _family(
        "dreamer_last_success_timestamp_seconds",
        "gauge",
        "When a profile's roll-up last committed (Unix time).",
        (
            _line("dreamer_last_success_timestamp_seconds", {"profile": p}, ts)
            for p, ts in sorted(last_success.items())
        ),
    )
    out += _family(
        "dreamer_deferred_in_a_row",
        "gauge",
        "Roll-ups of a profile deferred in a row up to its latest run (0 when it was not deferred).",
        (_line("dreamer_deferred_in_a_row", {"profile": p.profile}, p.deferred_in_a_row) for p in profiles),
    )
    out += _family(
        "dreamer_backlog_units",
        "gauge",
        "Units in a profile's bank not yet rolled up, as its latest run saw them.",
        (
            _line("dreamer_backlog_units", {"profile": p.profile}, p.backlog)
            for p in profiles
            if p.backlog is not None
        ),
    )
    out += _family(
        "dreamer_ledger_cards",
        "gauge",
        "Cards in the local promotion ledger.",
        [_line("dreamer_ledger_cards", {}, ledger_cards)],
    )
    return "\n".join(out) + "\n"


def profiles_now(state: StateStore, profiles: Iterable[str]) -> list[ProfileNow]:
    """Each profile's deferrals in a row and latest backlog, from the run records."""
    now = []
    for profile in sorted(profiles):
        job = rollup_job_id(profile)
        latest = state.runs(job, limit=1)
        backlog = latest[0].counts.get("backlog") if latest else None
        now.append(ProfileNow(profile, state.consecutive(job, "deferred"), backlog))
    return now


def write_metrics(path: Path, state: StateStore, profiles: Iterable[str]) -> None:
    """Collect from the state file and write the text file."""
    write_textfile(path, render(state.run_totals(), profiles_now(state, profiles), state.ledger_size()))


def write_textfile(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically; a symbolic link at ``path`` is replaced, never
    followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
