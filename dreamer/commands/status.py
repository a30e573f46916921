"""The body of ``dreamer status``: reads the state file, plus one activity call for pending units
and one listing per profile for its backlog, so it is safe while the daemon runs."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from dreamer.backends.base import BankActivity
from dreamer.commands.output import iso
from dreamer.config import Config
from dreamer.embeddings.factory import describe_embedder
from dreamer.errors import BackendError, ExitCode
from dreamer.jobs.open import open_for
from dreamer.jobs.spec import rollup_job_id
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.summarise import day_start, summariser_name
from dreamer.text import printable


async def status_command(config: Config, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    """Per profile: watermark, last run and its counts, pending units, backlog, deferrals; the
    ledger size."""
    profiles = sorted(config.profiles)
    activity: dict[str, BankActivity] = {}
    backlog: dict[str, int] = {}
    activity_error = None
    rows: list[dict[str, Any]] = []
    async with open_for(config, backend=True, state="write") as opened:
        state = opened.state
        try:
            activity = await opened.backend.activity([config.profile_bank_id(p) for p in profiles])
            rollup = Rollup(config, opened.backend, state)
            for name in profiles:
                backlog[name] = len(await rollup.backlog(name))
        except BackendError as exc:
            activity_error = str(exc)
        for name in profiles:
            profile = config.profiles[name]
            bank = config.bank_id(profile.bank)
            wm = state.watermark(name)
            runs = state.runs(rollup_job_id(name), limit=1)
            last = runs[0] if runs else None
            act = activity.get(bank)
            rows.append(
                {
                    "profile": name,
                    "enabled": profile.enabled,
                    "bank": bank,
                    "upstream": config.upstream_bank_id(name),
                    "watermark": iso(wm.created_at),
                    "last_rollup_at": iso(wm.rolled_at),
                    "units_in_bank": act.unit_count if act else None,
                    "units_pending": max(act.unit_count - wm.unit_count, 0) if act else None,
                    # Units after the watermark that no run has judged yet (what the next run reads).
                    "backlog": backlog.get(name),
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
                    "deferred_in_a_row": state.consecutive(rollup_job_id(name), "deferred"),
                    # The daemon runs each job every interval (plus up to jitter_s) after the last.
                    "next_run_due": None
                    if last is None or not profile.enabled
                    else iso(last.started_at + timedelta(minutes=config.schedule.interval_minutes)),
                }
            )
        ledger_size = state.ledger_size()
        vector_models = state.vector_models()
        tokens_today = state.llm_tokens_since(day_start(datetime.now(UTC)))
    embeddings = config.embeddings
    doc = {
        "state": str(config.state_path),
        "backend": config.backend.kind,
        "activity_error": activity_error,
        "ledger_cards": ledger_size,
        "embeddings": {
            "provider": embeddings.provider,
            "model": embeddings.model_name or None,
            "url": embeddings.url if embeddings.provider == "openai" else None,
            "dedup": describe_embedder(config),
            "vectors": [{"model_id": m, "dimension": d, "cards": n} for m, d, n in vector_models],
        },
        "llm": {
            "summariser": summariser_name(config),
            "tokens_today": tokens_today,
            "max_tokens_per_run": config.rollup.max_llm_tokens_per_run,
            "max_tokens_per_day": config.rollup.max_llm_tokens_per_day,
        },
        "interval_minutes": config.schedule.interval_minutes,
        "profiles": rows,
    }
    if as_json:
        json.dump(doc, out, indent=2)
        out.write("\n")
        return ExitCode.OK
    out.write(
        f"state {doc['state']} ({config.backend.kind} backend); ledger: {ledger_size} cards; "
        f"every {config.schedule.interval_minutes:g} min\n"
    )
    stored = ", ".join(f"{n} by {m}" for m, _d, n in vector_models) or "none"
    out.write(f"embeddings: {describe_embedder(config)}; vectors stored: {stored}\n")
    caps = [
        f"{cap:,} a {what}"
        for what, cap in (
            ("run", config.rollup.max_llm_tokens_per_run),
            ("day", config.rollup.max_llm_tokens_per_day),
        )
        if cap is not None
    ]
    out.write(
        f"summariser: {summariser_name(config)}; LLM tokens today {tokens_today:,}"
        f" (budget: {', '.join(caps) or 'none'})\n"
    )
    if activity_error:
        out.write(
            "backend unreachable, pending units and backlog unknown: "
            f"{printable(activity_error, keep_newlines=False)}\n"
        )
    for row in rows:
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
        out.write(
            f"{row['profile']}{flag}: {row['bank']} -> {row['upstream']}; watermark "
            f"{row['watermark'] or 'none'}; pending {pending}; backlog {waiting}; {last_text}"
        )
        if row["next_run_due"]:
            out.write(f"; next due {row['next_run_due']}")
        counts = last["counts"] if last is not None else {}
        if counts.get("llm_calls") or counts.get("cards_rejected") or counts.get("units_recarded"):
            out.write(
                f"; last run: {counts.get('llm_tokens', 0):,} LLM tokens, "
                f"{counts.get('cards_accepted', 0)} cards accepted, {counts.get('cards_rejected', 0)} "
                f"rejected, {counts.get('units_recarded', 0)} units re-carded"
            )
        if row["deferred_in_a_row"]:
            out.write(f"; deferred {row['deferred_in_a_row']}x in a row")
        out.write("\n")
    return ExitCode.OK
