"""The bodies of the bank commands: ``banks``, ``recall``, ``reflect`` and ``retain``, through the
bank router and its policy."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

from dreamer.backends.base import BankActivity
from dreamer.commands.output import emit, iso
from dreamer.config import Budget, Config
from dreamer.errors import BackendError, ExitCode, PermanentBackendError
from dreamer.jobs.open import open_for
from dreamer.readside.answers import MissingBank, first_config_fault


async def banks_command(
    config: Config, profile: str | None, *, as_json: bool, out: TextIO = sys.stdout
) -> int:
    """Aliases, bank ids, access and roles, with each bank's activity (units, last write)."""
    from dreamer.readside.policy import BankPolicy, render_banks

    infos = BankPolicy(config, profile).describe(include_disabled=True)
    activity: dict[str, BankActivity] = {}
    activity_error = None
    async with open_for(config, backend=True, reading=True) as opened:
        try:
            activity = await opened.backend.activity([i.bank_id for i in infos])
        except BackendError as exc:
            activity_error = str(exc)
    if as_json:
        docs = []
        for info in infos:
            act = activity.get(info.bank_id)
            doc = info.to_json()
            doc["units"] = act.unit_count if act else None
            doc["last_write_at"] = iso(act.last_write_at) if act else None
            doc["exists"] = act.exists if act else None
            docs.append(doc)
        json.dump({"banks": docs, "activity_error": activity_error}, out, indent=2)
        out.write("\n")
        return ExitCode.OK
    out.write(render_banks(infos) + "\n\n")
    if activity_error:
        out.write(f"activity unavailable: {activity_error}\n")
        return ExitCode.OK
    out.write("ACTIVITY\n")
    width = max((len(i.alias) for i in infos), default=5)
    for info in infos:
        act = activity.get(info.bank_id)
        if act is None or not act.exists:
            out.write(f"  {info.alias:<{width}}  not created yet (banks appear on their first write)\n")
        else:
            out.write(
                f"  {info.alias:<{width}}  {act.unit_count} units, last write {iso(act.last_write_at)}\n"
            )
    return ExitCode.OK


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
    from dreamer.readside.router import BankRouter

    async with open_for(config, backend=True, search=True, state="read", reading=True) as opened:
        router = BankRouter(config, opened.backend, profile=profile, ledger=opened.ledger)
        if not banks and profile is not None:
            answer = await router.read_union(query, limit=limit, budget=budget)
        else:
            answer = await router.recall(query, banks=list(banks) or None, limit=limit, budget=budget)
    emit(answer.to_json() if as_json else answer.render(), as_json, out)
    return _read_exit(answer.complete, answer.missing, "recall")


def _read_exit(complete: bool, missing: Sequence[MissingBank], operation: str) -> int:
    """0 when every bank answered; a bank refused for its credentials is a setting to fix (raised:
    exit 1 with the key to check), any other missing bank is worth a retry later (75)."""
    fault = first_config_fault(missing)
    if fault is not None:
        raise PermanentBackendError(f"bank {fault.alias}: {fault.detail}", operation=operation)
    return ExitCode.OK if complete else ExitCode.TEMPFAIL


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
    from dreamer.readside.router import BankRouter

    async with open_for(config, backend=True, reading=True) as opened:
        router = BankRouter(config, opened.backend, profile=profile)
        answer = await router.reflect_each(query, list(banks) or None, budget=budget)
    emit(answer.to_json() if as_json else answer.render(), as_json, out)
    return _read_exit(answer.complete, answer.missing, "reflect")


async def retain_command(
    config: Config,
    text: str,
    *,
    bank: str,
    profile: str | None,
    context: str | None,
    tags: Sequence[str],
    as_json: bool,
    scope: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Store one memory in a writable bank (never a roll-up bank); ``scope`` tags it ``scope:<scope>``."""
    from dreamer.readside.router import BankRouter
    from dreamer.readside.scope import scope_tag

    if scope is not None:
        scope_tag(scope)  # a bad value is refused before the backend is opened
    async with open_for(config, backend=True, search=True) as opened:
        answer = await BankRouter(config, opened.backend, profile=profile).retain(
            text, bank=bank, context=context, tags=tuple(tags), scope=scope
        )
    emit(answer.to_json() if as_json else answer.render(), as_json, out)
    return ExitCode.OK
