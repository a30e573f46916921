"""A scheduled job, what one run of it returns, and the protocol of a job body: plain data that the
service's plan produces and the job bodies consume."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from dreamer.config import Config


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One scheduled job: what it is, when it runs, and the log context of its runs.

    ``interval_s`` and ``jitter_s`` form the trigger; changing either reschedules the job.
    ``first_run_delay_s`` applies only when the job is added. ``context`` is bound into every log
    record of a run (for a roll-up: ``profile`` and ``bank``).
    """

    job_id: str
    kind: str
    key: str
    interval_s: float
    jitter_s: int
    first_run_delay_s: float
    misfire_grace_s: int
    timeout_s: float
    context: tuple[tuple[str, str], ...] = ()

    @property
    def trigger(self) -> tuple[float, int]:
        return (self.interval_s, self.jitter_s)

    @property
    def label(self) -> str:
        """How the STATUS line names the job: the profile for a roll-up, else the job id."""
        return self.key if self.kind == "rollup" else self.job_id

    def log_context(self) -> dict[str, str]:
        return dict(self.context)


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a run did: an outcome word, a human detail line, counters for the run record, and
    further fields for the run's log summary."""

    outcome: str
    detail: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    fields: Mapping[str, object] = field(default_factory=dict)


class JobRunner(Protocol):
    """The body of a job. Raise to report failure; return a :class:`JobOutcome` otherwise."""

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome: ...


#: Called with (step, detail) as a roll-up goes through its steps (the CLI's progress lines).
StepHook = Callable[[str, str], None]


def job_id(kind: str, key: str) -> str:
    return f"{kind}:{key}"


def rollup_job_id(profile: str) -> str:
    """The job id of a profile's roll-up: the key of its run records."""
    return job_id("rollup", profile)
