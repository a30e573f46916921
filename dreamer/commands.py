"""The bodies of the operator commands ``rollup`` and ``status``: load, run, print.

``dreamer rollup`` is the scheduled job's code path, run by hand; ``dreamer status`` reads the
state file only (plus one activity call for pending units), so it is safe while the daemon runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from dreamer.backends import open_backend
from dreamer.backends.base import BankActivity
from dreamer.config import Budget, Config
from dreamer.errors import BackendError
from dreamer.rollup.pipeline import Rollup, RollupReport, job_id_for
from dreamer.state import StateStore

EX_OK, EX_FAILED, EX_TEMPFAIL = 0, 1, 75
_TEMPORARY = {"deferred", "slot_busy"}


class UsageError(ValueError):
    """A command-line value that cannot be used; the message says what is expected."""


def parse_since(text: str) -> datetime:
    """An ISO 8601 time for ``--since``; a time without a zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since: {text!r} is not an ISO 8601 time (e.g. 2026-11-30T12:00:00Z or 2026-11-30)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def select_profiles(config: Config, names: Sequence[str]) -> list[str]:
    """The named profiles (all enabled ones when none is named); unknown names are an error."""
    if not names:
        return sorted(config.enabled_profiles())
    unknown = [n for n in names if n not in config.profiles]
    if unknown:
        known = ", ".join(sorted(config.profiles)) or "none"
        raise UsageError(f"--profile: unknown profile {unknown[0]!r} (known: {known})")
    return list(dict.fromkeys(names))


async def rollup_command(
    config: Config,
    profiles: Sequence[str],
    *,
    dry_run: bool,
    since: datetime | None,
    as_json: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run one roll-up per profile now; print each report; exit 75 when any was deferred."""
    selected = select_profiles(config, profiles)

    def progress(step: str, profile: str) -> None:
        if not as_json:
            print(f"  {profile}: {step}", file=err, flush=True)

    backend = open_backend(config)
    reports: list[RollupReport] = []
    try:
        with StateStore.open(config.state_path) as state:
            rollup = Rollup(config, backend, state, on_step=progress)
            activity = await rollup.activity(selected) if selected else {}
            for profile in selected:
                bank = config.bank_id(config.profiles[profile].bank)
                reports.append(
                    await rollup.run(profile, activity=activity.get(bank), dry_run=dry_run, since=since)
                )
    finally:
        await backend.aclose()
    if as_json:
        json.dump({"reports": [r.to_json() for r in reports]}, out, indent=2)
        out.write("\n")
    else:
        for report in reports:
            out.write(format_report(report))
    outcomes = {r.outcome for r in reports}
    if "failed" in outcomes:
        return EX_FAILED
    return EX_TEMPFAIL if outcomes & _TEMPORARY else EX_OK


def format_report(report: RollupReport) -> str:
    """A roll-up report for people: the outcome line, then each card with its verdict and why."""
    lines = [f"{report.profile}: {report.outcome} — {report.reason}"]
    if report.units_seen:
        lines.append(
            f"  units {report.units_seen} seen, {report.units_selected} selected; "
            f"{report.cards} cards ({report.summariser}); {report.promoted} "
            f"{'to promote' if report.dry_run else 'promoted'}, "
            f"{report.reinforced} reinforced, {report.conflicts} conflicts; "
            f"{report.duration_s:.2f}s"
        )
    for card in report.plan:
        lines.append(f"  {card.verdict:<9} {card.text}")
        lines.append(f"            why: {card.reason}")
    return "\n".join(lines) + "\n"


async def status_command(config: Config, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    """Per profile: watermark, last run and its counts, pending units, deferrals; the ledger size."""
    profiles = sorted(config.profiles)
    activity: dict[str, BankActivity] = {}
    activity_error = None
    backend = open_backend(config)
    try:
        activity = await backend.activity([config.bank_id(config.profiles[p].bank) for p in profiles])
    except BackendError as exc:
        activity_error = str(exc)
    finally:
        await backend.aclose()
    rows: list[dict[str, Any]] = []
    with StateStore.open(config.state_path) as state:
        for name in profiles:
            profile = config.profiles[name]
            bank = config.bank_id(profile.bank)
            wm = state.watermark(name)
            runs = state.runs(job_id_for(name), limit=1)
            last = runs[0] if runs else None
            act = activity.get(bank)
            rows.append(
                {
                    "profile": name,
                    "enabled": profile.enabled,
                    "bank": bank,
                    "upstream": config.bank_id(config.upstream_alias(name)),
                    "watermark": _iso(wm.created_at),
                    "last_rollup_at": _iso(wm.rolled_at),
                    "units_in_bank": act.unit_count if act else None,
                    "units_pending": max(act.unit_count - wm.unit_count, 0) if act else None,
                    "last_run": None
                    if last is None
                    else {
                        "run_id": last.run_id,
                        "outcome": last.outcome or "running",
                        "detail": last.detail,
                        "started_at": _iso(last.started_at),
                        "finished_at": _iso(last.finished_at),
                        "counts": dict(last.counts),
                    },
                    "deferred_in_a_row": state.consecutive(job_id_for(name), "deferred"),
                    # The daemon runs each job every interval (plus up to jitter_s) after the last.
                    "next_run_due": None
                    if last is None or not profile.enabled
                    else _iso(last.started_at + timedelta(minutes=config.schedule.interval_minutes)),
                }
            )
        ledger_size = state.ledger_size()
    doc = {
        "state": str(config.state_path),
        "backend": config.backend.kind,
        "activity_error": activity_error,
        "ledger_cards": ledger_size,
        "interval_minutes": config.schedule.interval_minutes,
        "profiles": rows,
    }
    if as_json:
        json.dump(doc, out, indent=2)
        out.write("\n")
        return EX_OK
    out.write(
        f"state {doc['state']} ({config.backend.kind} backend); ledger: {ledger_size} cards; "
        f"every {config.schedule.interval_minutes:g} min\n"
    )
    if activity_error:
        out.write(f"backend unreachable, pending units unknown: {activity_error}\n")
    for row in rows:
        last = row["last_run"]
        last_text = (
            "never run"
            if last is None
            else f"last {last['outcome']} at {last['finished_at'] or last['started_at']}"
            + (f" ({last['detail']})" if last["detail"] else "")
        )
        pending = "?" if row["units_pending"] is None else row["units_pending"]
        flag = "" if row["enabled"] else " [disabled]"
        out.write(
            f"{row['profile']}{flag}: {row['bank']} -> {row['upstream']}; watermark "
            f"{row['watermark'] or 'none'}; pending {pending}; {last_text}"
        )
        if row["next_run_due"]:
            out.write(f"; next due {row['next_run_due']}")
        if row["deferred_in_a_row"]:
            out.write(f"; deferred {row['deferred_in_a_row']}x in a row")
        out.write("\n")
    return EX_OK


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(UTC).isoformat(timespec="seconds")


# --- the read side: banks, recall, reflect, retain, card -------------------------------------------


async def banks_command(
    config: Config, profile: str | None, *, as_json: bool, out: TextIO = sys.stdout
) -> int:
    """Aliases, bank ids, access and roles, with each bank's activity (units, last write)."""
    from dreamer.routing import BankPolicy, render_banks

    infos = BankPolicy(config, profile).describe(include_disabled=True)
    activity: dict[str, BankActivity] = {}
    activity_error = None
    backend = open_backend(config)
    try:
        activity = await backend.activity([i.bank_id for i in infos])
    except BackendError as exc:
        activity_error = str(exc)
    finally:
        await backend.aclose()
    if as_json:
        docs = []
        for info in infos:
            act = activity.get(info.bank_id)
            doc = info.to_json()
            doc["units"] = act.unit_count if act else None
            doc["last_write_at"] = _iso(act.last_write_at) if act else None
            doc["exists"] = act.exists if act else None
            docs.append(doc)
        json.dump({"banks": docs, "activity_error": activity_error}, out, indent=2)
        out.write("\n")
        return EX_OK
    out.write(render_banks(infos) + "\n\n")
    if activity_error:
        out.write(f"activity unavailable: {activity_error}\n")
        return EX_OK
    out.write("ACTIVITY\n")
    width = max((len(i.alias) for i in infos), default=5)
    for info in infos:
        act = activity.get(info.bank_id)
        if act is None or not act.exists:
            out.write(f"  {info.alias:<{width}}  not created yet (banks appear on their first write)\n")
        else:
            out.write(
                f"  {info.alias:<{width}}  {act.unit_count} units, last write {_iso(act.last_write_at)}\n"
            )
    return EX_OK


async def recall_command(
    config: Config,
    query: str,
    *,
    banks: Sequence[str],
    profile: str | None,
    budget: Budget | None,
    limit: int | None,
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """Labelled recall: the named banks, else the profile's read-union, else the default bank.
    Exit 75 when a bank could not be read (the others' results are still printed)."""
    from dreamer.routing import BankRouter

    backend = open_backend(config)
    try:
        router = BankRouter(config, backend, profile=profile)
        if not banks and profile is not None:
            answer = await router.read_union(query, limit=limit, budget=budget)
        else:
            answer = await router.recall(query, banks=list(banks) or None, limit=limit, budget=budget)
    finally:
        await backend.aclose()
    _emit(answer.to_json() if as_json else answer.render(), as_json, out)
    return EX_OK if answer.complete else EX_TEMPFAIL


async def reflect_command(
    config: Config,
    query: str,
    *,
    banks: Sequence[str],
    profile: str | None,
    budget: Budget | None,
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """One reflect per bank, each answer labelled with its alias."""
    from dreamer.routing import BankRouter

    backend = open_backend(config)
    try:
        router = BankRouter(config, backend, profile=profile)
        answer = await router.reflect_each(query, list(banks) or None, budget=budget)
    finally:
        await backend.aclose()
    _emit(answer.to_json() if as_json else answer.render(), as_json, out)
    return EX_OK if answer.complete else EX_TEMPFAIL


async def retain_command(
    config: Config,
    text: str,
    *,
    bank: str,
    profile: str | None,
    context: str | None,
    tags: Sequence[str],
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """Store one memory in a writable bank (never a roll-up bank)."""
    from dreamer.routing import BankRouter

    backend = open_backend(config)
    try:
        answer = await BankRouter(config, backend, profile=profile).retain(
            text, bank=bank, context=context, tags=tuple(tags)
        )
    finally:
        await backend.aclose()
    _emit(answer.to_json() if as_json else answer.render(), as_json, out)
    return EX_OK


async def card_command(
    config: Config, profiles: Sequence[str], *, write: bool, as_json: bool, out: TextIO = sys.stdout
) -> int:
    """Print the peer cards from the local promotion ledger; with ``write``, write them too."""
    from dreamer.peercard import peer_cards, refresh_peer_cards

    chosen = select_profiles(config, profiles)
    with StateStore.open(config.state_path) as state:
        cards = peer_cards(config, state, profiles=chosen, include_global=not profiles)
        written: list[Path] = []
        if write:
            # The polish (peer_card.polish) needs the backend; the cards printed are the cards as built.
            backend = open_backend(config) if config.peer_card.polish else None
            try:
                written = await refresh_peer_cards(
                    config, state, profiles=chosen, include_global=not profiles, backend=backend
                )
            finally:
                if backend is not None:
                    await backend.aclose()
    if as_json:
        doc = {name: (card.to_json() if card else None) for name, _path, card in cards}
        _emit({"cards": doc, "written": [str(p) for p in written]}, True, out)
        return EX_OK
    for name, _path, card in cards:
        out.write(f"{card.render()}\n\n" if card else f"({name}: no promoted cards yet)\n\n")
    if write:
        out.write(_written(written) + "\n")
    return EX_OK


def _written(paths: Sequence[Any]) -> str:
    if not paths:
        return "no peer card written (set profiles.<name>.peer_card_path or peer_card.global_path)"
    return "\n".join(f"wrote {p}" for p in paths)


def _emit(payload: Any, as_json: bool, out: TextIO) -> None:
    if as_json:
        json.dump(payload, out, indent=2, ensure_ascii=False)
    else:
        out.write(str(payload).rstrip("\n"))
    out.write("\n")
