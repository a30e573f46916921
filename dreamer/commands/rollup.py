"""The body of ``dreamer rollup``: the scheduled job run by hand, one report per profile."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

from dreamer.config import Config
from dreamer.errors import UsageError
from dreamer.outcomes import exit_code
from dreamer.rollup.report import RollupReport
from dreamer.service.runner import run_rollups_now
from dreamer.text import printable


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
    """Run each profile's roll-up job now, exactly as the daemon does; print each report; exit 75
    when any was deferred or busy, 1 when any failed."""
    selected = select_profiles(config, profiles)

    def progress(step: str, profile: str) -> None:
        if not as_json:
            print(f"  {profile}: {step}", file=err, flush=True)

    reports = await run_rollups_now(config, selected, dry_run=dry_run, since=since, on_step=progress)
    if as_json:
        json.dump({"reports": [r.to_json() for r in reports]}, out, indent=2)
        out.write("\n")
    else:
        for report in reports:
            out.write(format_report(report))
    return exit_code(r.outcome for r in reports)


def format_report(report: RollupReport) -> str:
    """A roll-up report for people: the outcome line, then each card with its verdict and why."""
    lines = [f"{report.profile}: {report.outcome} — {printable(report.reason, keep_newlines=False)}"]
    if report.units_seen:
        lines.append(
            f"  units {report.units_seen} seen, {report.units_selected} selected; "
            f"{report.cards} cards ({report.summariser}; embeddings {report.embedder}); {report.promoted} "
            f"{'to promote' if report.dry_run else 'promoted'}, "
            f"{report.reinforced} reinforced, {report.conflicts} conflicts; "
            f"{report.duration_s:.2f}s"
        )
        dropped = ", ".join(f"{n} {reason}" for reason, n in sorted(report.dropped.items()))
        lines.append(
            f"  units in {report.batches} batch(es): {report.units_promoted} promoted, "
            f"{report.units_merged} merged, {report.units_chatter} chatter, "
            f"{report.units_left_out} left out, {report.units_pending} pending"
            + (f" (dropped: {dropped})" if dropped else "")
        )
        if report.units_tagged_rollup:
            lines.append(
                f"  {report.units_tagged_rollup} unit(s) tagged 'rollup' without being Dreamer's cards: "
                "rolled up as ordinary memories"
            )
        if report.cards_accepted or report.cards_rejected or report.cards_uncited:
            rejected = ", ".join(
                f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(report.cards_rejected.items())
            )
            lines.append(
                f"  grounding: {report.cards_accepted} cards accepted, "
                f"{sum(report.cards_rejected.values())} rejected"
                + (f" ({rejected})" if rejected else "")
                + f", {report.units_recarded} units re-carded, "
                f"{report.cards_uncited} cards for units no card held"
            )
        if report.llm_calls:
            estimated = f", {report.llm_calls_estimated} estimated" if report.llm_calls_estimated else ""
            lines.append(
                f"  LLM: {report.llm_calls} call(s){estimated}, {report.llm_prompt_tokens:,} prompt + "
                f"{report.llm_completion_tokens:,} completion tokens"
                + (f"; {report.llm_truncated} answer(s) cut at the token cap" if report.llm_truncated else "")
            )
        if report.budget_reached:
            lines.append(
                f"  token budget per {report.budget_reached} reached: later batches summarised extractively"
            )
    for rejection in report.rejections:
        lines.append(f"  rejected  {printable(rejection.text, keep_newlines=False)}")
        lines.append(
            f"            why: {rejection.reason} ({printable(rejection.detail, keep_newlines=False)}); "
            f"cited {', '.join(rejection.source_ids) or 'nothing'}"
        )
    for card in report.plan:
        lines.append(f"  {card.verdict:<9} {printable(card.text, keep_newlines=False)}")
        lines.append(f"            why: {printable(card.reason, keep_newlines=False)}")
    return "\n".join(lines) + "\n"
