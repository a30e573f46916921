"""What the planner is told besides the entries: their ages, URL answers, the model, the skills directory.

Each source may be missing or unreadable; that becomes a note in the report and a default that
makes the plan more careful (ages count from today, model entries and rule moves are left alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from dreamer.hermes.audit.age import entry_age
from dreamer.hermes.audit.classify import Classification
from dreamer.hermes.audit.config_yaml import ConfigYamlError, read_model_name
from dreamer.hermes.audit.planner import Entry, PlanContext, urls_to_verify
from dreamer.hermes.audit.probe import UrlProbe, probe_urls
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.audit.state import AuditState, AuditStateError, load_state

__all__ = ["load_first_seen", "plan_context"]


def load_first_seen(agent: AgentFiles, notes: list[str]) -> AuditState:
    """The agent's first-seen state, or an empty one (with a note) when it cannot be read."""
    try:
        return load_state(agent.state_path)
    except AuditStateError as exc:
        # Ages then count from today: nothing becomes old enough to delete because of this.
        notes.append(f"{exc}; entry ages without a date count from this audit")
        return AuditState()


def plan_context(
    agent: AgentFiles,
    settings: AuditSettings,
    now: datetime,
    entries: Sequence[Entry],
    classifications: Mapping[int, Classification],
    state: AuditState,
    probe: UrlProbe,
    notes: list[str],
) -> PlanContext:
    """Everything `plan_audit` needs to know about `entries` beyond their text and classification."""
    return PlanContext(
        settings=settings,
        ages={entry.id: entry_age(entry.text, state.first_seen_of(entry.text), now) for entry in entries},
        url_answers=_url_answers(settings, urls_to_verify(entries, classifications), probe, notes),
        configured_model=_configured_model(agent, notes),
        skill_available=_skill_available(agent, notes),
    )


def _url_answers(
    settings: AuditSettings, urls: Sequence[str], probe: UrlProbe, notes: list[str]
) -> Mapping[str, bool]:
    """The answers of the URLs this audit may check; a URL not checked is left out (and noted), so
    its entry is neither marked nor cleared."""
    if not urls:
        return {}
    if not settings.checks_urls:
        why = (
            "no host is listed in audit.verify_hosts"
            if not settings.verify_hosts
            else "a dry run sends no request (--verify-urls checks the hosts in audit.verify_hosts)"
        )
        notes.append(f"{len(urls)} URL(s) not checked: {why}")
        return {}
    checks = probe_urls(urls, probe, settings.allowed_hosts)
    if checks.not_checked:
        notes.append(
            f"URLs not checked, their host is not in audit.verify_hosts: {', '.join(checks.not_checked)}"
        )
    return checks.answers


def _configured_model(agent: AgentFiles, notes: list[str]) -> str | None:
    if agent.config_yaml is None:
        return None
    try:
        return read_model_name(agent.config_yaml)
    except ConfigYamlError as exc:
        notes.append(f"model entries not checked: {exc}")
        return None


def _skill_available(agent: AgentFiles, notes: list[str]) -> bool:
    skills_dir = agent.skills_dir
    if skills_dir is None:
        return False
    if not skills_dir.is_dir():
        notes.append(f"skills directory {skills_dir} does not exist; operating rules stay in place")
        return False
    return True
