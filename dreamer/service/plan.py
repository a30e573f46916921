"""The job plan: which jobs a configuration asks for, as pure data.

:func:`plan_jobs` turns a :class:`~dreamer.config.Config` into a table ``{job_id: JobSpec}``; the
daemon schedules that table, and on reload :func:`diff_plans` says which jobs to add, remove or
reschedule, so untouched jobs keep their place in the schedule. How one run of a job is carried
out is :mod:`dreamer.service.runner`; the job bodies are in :mod:`dreamer.jobs`.

To add a kind of job (say ``audit:<agent>``): write a planner ``def plan_audit_jobs(config) ->
Iterable[JobSpec]`` and register it in :data:`PLANNERS`; register its runner in
:data:`dreamer.service.runner.DEFAULT_RUNNERS`; optionally give it a noun in :data:`KIND_NOUNS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dreamer.config import Config
from dreamer.jobs.spec import JobSpec, job_id, rollup_job_id

# --- the plan -----------------------------------------------------------------------------------

Planner = Callable[[Config], Iterable[JobSpec]]


def rollup_job(config: Config, name: str) -> JobSpec:
    """The roll-up job of one profile (enabled or not: ``dreamer rollup --profile`` may name any)."""
    schedule = config.schedule
    return JobSpec(
        job_id=rollup_job_id(name),
        kind="rollup",
        key=name,
        interval_s=schedule.interval_minutes * 60.0,
        jitter_s=schedule.jitter_s,
        first_run_delay_s=schedule.first_run_delay_s,
        misfire_grace_s=schedule.misfire_grace_s,
        timeout_s=schedule.job_timeout_s,
        context=(("profile", name), ("bank", config.profile_bank_id(name))),
    )


def plan_rollup_jobs(config: Config) -> Iterable[JobSpec]:
    """One roll-up job per enabled profile."""
    for name in sorted(config.enabled_profiles()):
        yield rollup_job(config, name)


def plan_audit_jobs(config: Config) -> Iterable[JobSpec]:
    """One memory-file audit check per enabled agent (the audit itself runs only when due)."""
    if not config.audit.enabled:
        return
    schedule = config.schedule
    for name, agent in sorted(config.agents.items()):
        if not agent.enabled:
            continue
        yield JobSpec(
            job_id=job_id("audit", name),
            kind="audit",
            key=name,
            interval_s=config.audit.check_every_minutes * 60.0,
            jitter_s=schedule.jitter_s,
            first_run_delay_s=schedule.first_run_delay_s,
            misfire_grace_s=schedule.misfire_grace_s,
            timeout_s=schedule.job_timeout_s,
            context=(("agent", name), ("memories_dir", str(agent.memories_dir))),
        )


# kind -> planner. Register a new kind of job here.
PLANNERS: Mapping[str, Planner] = {
    "rollup": plan_rollup_jobs,
    "audit": plan_audit_jobs,
}

# kind -> (singular, plural) noun used to count jobs in the STATUS line.
KIND_NOUNS: Mapping[str, tuple[str, str]] = {
    "rollup": ("profile", "profiles"),
    "audit": ("agent", "agents"),
}


def plan_jobs(config: Config, planners: Mapping[str, Planner] = PLANNERS) -> dict[str, JobSpec]:
    """The full job table for ``config``, keyed by job id (``rollup:<profile>``, ...)."""
    plan: dict[str, JobSpec] = {}
    for kind, planner in planners.items():
        for spec in planner(config):
            if spec.kind != kind:
                raise ValueError(f"planner for {kind!r} produced a {spec.kind!r} job ({spec.job_id})")
            if spec.job_id in plan:
                raise ValueError(f"two jobs share the id {spec.job_id!r}")
            plan[spec.job_id] = spec
    return plan


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """How a new job table differs from the running one; each field is a sorted tuple of job ids.

    - ``added`` / ``removed``: schedule or unschedule;
    - ``rescheduled``: the trigger (interval or jitter) changed, so the next run time is recomputed;
    - ``updated``: the trigger is the same but something else changed (timeout, misfire grace, log
      context): the job keeps its next run time and picks up the new spec at its next run;
    - ``unchanged``: nothing to do.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    rescheduled: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.rescheduled or self.updated)

    def summary(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "rescheduled": list(self.rescheduled),
            "updated": list(self.updated),
        }


def diff_plans(old: Mapping[str, JobSpec], new: Mapping[str, JobSpec]) -> PlanDiff:
    """Compare two job tables (pure)."""
    rescheduled: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for jid in sorted(old.keys() & new.keys()):
        before, after = old[jid], new[jid]
        if before.trigger != after.trigger:
            rescheduled.append(jid)
        elif before != after:
            updated.append(jid)
        else:
            unchanged.append(jid)
    return PlanDiff(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        rescheduled=tuple(rescheduled),
        updated=tuple(updated),
        unchanged=tuple(unchanged),
    )
