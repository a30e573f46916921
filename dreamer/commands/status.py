"""The body of ``dreamer status``: reads the state file, plus one activity call for pending units
and one listing per profile for its backlog, so it is safe while the daemon runs. It never creates
a state file: with none there it says where it looked."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from dreamer.backends.base import BankActivity, MemoryBackend
from dreamer.backends.embedded.vector_cache import segments_folder
from dreamer.commands.output import iso
from dreamer.config import Config
from dreamer.embeddings.factory import EmbedderChoice, choice_lines, describe_embedder, resolve_embeddings
from dreamer.embeddings.segments import on_disk
from dreamer.errors import BackendError, ExitCode
from dreamer.jobs.leases import PROFILE_LEASE
from dreamer.jobs.open import missing_state, open_for, state_name
from dreamer.jobs.spec import rollup_job_id
from dreamer.rollup.judging import GATE_BACKFILL_BATCH
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.promote import INPUT_FACT_TYPES
from dreamer.rollup.summarise import day_start, summariser_name
from dreamer.state import Holder, StateStore, Watermark
from dreamer.text import printable


@dataclass
class _Activity:
    """What the backend said: each profile bank's activity and each profile's backlog, or why not."""

    banks: dict[str, BankActivity] = field(default_factory=dict)
    backlog: dict[str, int] = field(default_factory=dict)
    error: str | None = None


async def status_command(config: Config, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    """Per profile: watermark, last run and its counts, pending units, backlog, deferrals; the
    ledger size."""
    async with open_for(config, backend=True, state="present", reading=True) as opened:
        state = opened.ledger
        activity = await _read_activity(config, opened.backend, state)
        holders = {h.name: h for h in state.holders(PROFILE_LEASE)} if state is not None else {}
        rows = [_profile_row(config, name, state, activity, holders) for name in sorted(config.profiles)]
        choice = resolve_embeddings(config)
        doc = _document(config, choice, state, rows, activity.error)
    if as_json:
        json.dump(doc, out, indent=2)
        out.write("\n")
    else:
        _render(config, choice, doc, out)
    return ExitCode.OK


async def _read_activity(config: Config, backend: MemoryBackend, state: StateStore | None) -> _Activity:
    """One activity call for every profile bank and one listing per profile for its backlog (units
    after the watermark that no run has judged yet: what the next run reads).
    A backend that cannot be reached is said, not raised: the state file still has its news."""
    found = _Activity()
    profiles = sorted(config.profiles)
    try:
        found.banks = await backend.activity([config.profile_bank_id(p) for p in profiles])
        for name in profiles:
            if state is not None:
                found.backlog[name] = len(await Rollup(config, backend, state).backlog(name))
            else:  # nothing rolled up yet: every unit of the bank waits for the first run
                units = await backend.list_units_since(
                    config.profile_bank_id(name), None, fact_types=INPUT_FACT_TYPES
                )
                found.backlog[name] = len(units)
    except BackendError as exc:
        found.error = str(exc)
    return found


def _profile_row(
    config: Config, name: str, state: StateStore | None, activity: _Activity, holders: dict[str, Holder]
) -> dict[str, Any]:
    """One profile's line of the status, as data (``--json``) and for :func:`_render`; ``holder``
    is the host that holds its lease (hosts sharing a PostgreSQL state), None when none ever has."""
    held = holders.get(PROFILE_LEASE + name)
    profile = config.profiles[name]
    bank = config.profile_bank_id(name)
    wm = state.watermark(name) if state is not None else Watermark()
    runs = state.runs(rollup_job_id(name), limit=1) if state is not None else []
    last = runs[0] if runs else None
    act = activity.banks.get(bank)
    return {
        "profile": name,
        "enabled": profile.enabled,
        "bank": bank,
        "upstream": config.upstream_bank_id(name),
        "watermark": iso(wm.created_at),
        "last_rollup_at": iso(wm.rolled_at),
        "units_in_bank": act.unit_count if act else None,
        "units_pending": max(act.unit_count - wm.unit_count, 0) if act else None,
        "backlog": activity.backlog.get(name),
        "last_run": None
        if last is None
        else {
            "run_id": last.run_id,
            "outcome": last.outcome or "running",
            "detail": last.detail,
            "started_at": iso(last.started_at),
            "finished_at": iso(last.finished_at),
            "counts": dict(last.counts),
        },
        "holder": None
        if held is None
        else {"host": held.owner, "token": held.token, "expires_in_s": round(held.left_s, 1)},
        "deferred_in_a_row": state.consecutive(rollup_job_id(name), "deferred") if state is not None else 0,
        # The daemon runs each job every interval (plus up to jitter_s) after the last.
        "next_run_due": None
        if last is None or not profile.enabled
        else iso(last.started_at + timedelta(minutes=config.schedule.interval_minutes)),
    }


def _document(
    config: Config,
    choice: EmbedderChoice,
    state: StateStore | None,
    rows: list[dict[str, Any]],
    activity_error: str | None,
) -> dict[str, Any]:
    """The whole status as data: the state file, the ledger, embeddings, the LLM's day, the rows.

    ``embeddings`` holds the provider configured, the one in use (``resolved``: ``auto`` comes to
    ``local`` or ``none``), the ``reason`` and, when ``auto`` found model files it cannot use, the
    ``warning`` (:func:`dreamer.embeddings.factory.resolve_embeddings`)."""
    embeddings = config.embeddings
    vector_models = state.vector_models() if state is not None else []
    hosts = state.live_hosts() if state is not None else []
    return {
        "state": state_name(config),
        "state_backend": config.state.backend,
        "state_exists": state is not None,
        "hosts": [{"host": h.owner, "label": h.label, "expires_in_s": round(h.left_s, 1)} for h in hosts],
        "state_missing": None if state is not None else missing_state(config),
        "backend": config.backend.kind,
        "activity_error": activity_error,
        "ledger_cards": state.ledger_size() if state is not None else 0,
        # Cards indexed before gate rows existed and not backfilled yet (`judging.backfill_gates`).
        "gate_rows_missing": state.gate_backfill_left() if state is not None else 0,
        "embeddings": {
            **choice.to_json(),
            "model": (embeddings.model_name or None) if choice.provider != "none" else None,
            "url": embeddings.url if embeddings.provider == "openai" else None,
            "dedup": describe_embedder(config, choice),
            "vectors": [{"model_id": m, "dimension": d, "cards": n} for m, d, n in vector_models],
            "vector_storage": state.vector_storage() if state is not None else None,
            "vector_index": _vector_index(config),
            "store_vector_index": _store_vector_index(config),
        },
        "llm": {
            "summariser": summariser_name(config),
            "tokens_today": state.llm_tokens_since(day_start(datetime.now(UTC))) if state is not None else 0,
            "max_tokens_per_run": config.rollup.max_llm_tokens_per_run,
            "max_tokens_per_day": config.rollup.max_llm_tokens_per_day,
        },
        "interval_minutes": config.schedule.interval_minutes,
        "profiles": rows,
    }


def _render(config: Config, choice: EmbedderChoice, doc: dict[str, Any], out: TextIO) -> None:
    """The status as lines for a person: the header, then one line per profile. The embeddings
    line names the embedder in use (and, for ``auto``, why); a ``warning:`` line follows it when
    ``auto`` found model files it cannot use (:func:`~dreamer.embeddings.factory.choice_lines`,
    which ``check-config`` prints too)."""
    out.write(
        f"state {doc['state']} ({config.backend.kind} backend); ledger: {doc['ledger_cards']} cards; "
        f"every {config.schedule.interval_minutes:g} min\n"
    )
    if doc["state_missing"]:
        out.write(doc["state_missing"] + "\n")
    if doc["gate_rows_missing"]:
        out.write(
            f"gate rows: {doc['gate_rows_missing']:,} ledger cards have none yet; each roll-up writes "
            f"{GATE_BACKFILL_BATCH:,} more, and until then such a card is read in full when a new "
            "card's words name it\n"
        )
    if doc["hosts"]:
        names = ", ".join(f"{h['host']} ({h['label']})" for h in doc["hosts"])
        out.write(f"hosts alive: {names}\n")
    stored = ", ".join(f"{v['cards']} by {v['model_id']}" for v in doc["embeddings"]["vectors"]) or "none"
    embedder, *warnings = choice_lines(config, choice)
    storage = doc["embeddings"]["vector_storage"]
    index = doc["embeddings"]["vector_index"]
    if storage and index["segments"]:
        count, where = index["segments"], index["folder"]
        storage += f"; {index['vectors']:,} indexed in {count} on-disk segments ({where})"
    if storage and (stored != "none" or doc["state_backend"] == "postgres"):
        stored += f" ({storage})"
    in_store = doc["embeddings"]["store_vector_index"]
    if in_store is not None and in_store["segments"]:
        stored += (
            f"; the embedded store's: {in_store['vectors']:,} in {in_store['segments']} on-disk segments"
            f" ({in_store['folder']})"
        )
    out.write(f"{embedder}; vectors stored: {stored}\n")
    if len(doc["embeddings"]["vectors"]) > 1:
        out.write(
            "  the ledger holds vectors of several models: after a model change each run re-embeds "
            "reembed_batch cards; `dreamer state reembed` embeds the rest now\n"
        )
    for line in warnings:
        out.write(line + "\n")
    caps = [
        f"{cap:,} a {what}"
        for what, cap in (
            ("run", config.rollup.max_llm_tokens_per_run),
            ("day", config.rollup.max_llm_tokens_per_day),
        )
        if cap is not None
    ]
    out.write(
        f"summariser: {doc['llm']['summariser']}; LLM tokens today {doc['llm']['tokens_today']:,}"
        f" (budget: {', '.join(caps) or 'none'})\n"
    )
    if doc["activity_error"]:
        out.write(
            "backend unreachable, pending units and backlog unknown: "
            f"{printable(doc['activity_error'], keep_newlines=False)}\n"
        )
    for row in doc["profiles"]:
        out.write(_row_line(row) + "\n")


def _row_line(row: dict[str, Any]) -> str:
    """One profile's status line."""
    last = row["last_run"]
    last_text = (
        "never run"
        if last is None
        else f"last {last['outcome']} at {last['finished_at'] or last['started_at']}"
        + (f" ({printable(last['detail'], keep_newlines=False)})" if last["detail"] else "")
    )
    pending = "?" if row["units_pending"] is None else row["units_pending"]
    waiting = "?" if row["backlog"] is None else row["backlog"]
    flag = "" if row["enabled"] else " [disabled]"
    line = (
        f"{row['profile']}{flag}: {row['bank']} -> {row['upstream']}; watermark "
        f"{row['watermark'] or 'none'}; pending {pending}; backlog {waiting}; {last_text}"
    )
    if row["next_run_due"]:
        line += f"; next due {row['next_run_due']}"
    counts = last["counts"] if last is not None else {}
    if counts.get("llm_calls") or counts.get("cards_rejected") or counts.get("units_recarded"):
        line += (
            f"; last run: {counts.get('llm_tokens', 0):,} LLM tokens, "
            f"{counts.get('cards_accepted', 0)} cards accepted, {counts.get('cards_rejected', 0)} "
            f"rejected, {counts.get('units_recarded', 0)} units re-carded"
        )
    if row["deferred_in_a_row"]:
        line += f"; deferred {row['deferred_in_a_row']}x in a row"
    holder = row["holder"]
    if holder is not None:
        left = holder["expires_in_s"]
        line += f"; held by {holder['host']} " + (
            f"for {left:g} s more" if left > 0 else f"(expired {-left:g} s ago)"
        )
    return line


def _store_vector_index(config: Config) -> dict[str, Any] | None:
    """The embedded store's on-disk segments beside its file (docs/design/embedded-store.md);
    None on Hindsight."""
    if config.backend.kind != "embedded":
        return None
    folder = segments_folder(config.embedded_path)
    segments, vectors = on_disk(folder)
    return {"folder": str(folder), "segments": segments, "vectors": vectors}


def _vector_index(config: Config) -> dict[str, Any]:
    """The judge's on-disk segments under ``<state_dir>/vectors`` (docs/design/dedup.md)."""
    segments, vectors = on_disk(config.vector_index_dir)
    return {"folder": str(config.vector_index_dir), "segments": segments, "vectors": vectors}
