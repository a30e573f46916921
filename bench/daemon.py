"""The daemon's footprint: ``dreamer run`` started the way systemd starts it, measured from outside.

    python -m bench.daemon [--quick] [--json] [--embeddings {none,auto}]

The daemon runs as a child process with ``NOTIFY_SOCKET`` pointing at a real ``AF_UNIX`` datagram
socket this benchmark owns, and ``WATCHDOG_USEC`` set, like ``Type=notify`` with ``WatchdogSec=``.
Measured, from ``/proc/PID/status`` (VmRSS) and ``/proc/PID/stat`` (utime + stime):

- time from exec to ``READY=1``;
- RSS after start, and over 100 roll-up cycles of idle profiles (a tiny interval, no jitter);
- CPU seconds over an idle minute (``--quick``: 10 s);
- SIGHUP reload latency (``RELOADING=1`` → ``READY=1``);
- drain time on SIGTERM (signal → exit), idle and at the end of the cycling run.

Side by side, the floors: a bare ``python -c "import time; ..."`` process and one that only imports
the daemon's modules, for RSS and idle CPU.

The daemon's configuration pins ``[embeddings] provider = "none"`` (the lexical dedup, which the
targets are for); ``--embeddings auto`` measures the default instead, which runs the local model
where it is installed (numpy and the model's weights in the daemon from its first roll-up).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._common import BenchError, machine_info, machine_line, progress, render_table, report
from bench.notify_socket import NotificationTimeout, NotifySocket, has, without_systemd

REPO_ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 60.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TARGET_READY_S = 1.5
TARGET_RSS_MIB = 60.0
TARGET_IDLE_CPU_PCT = 0.5
#: RSS may move by allocator noise; more than this between cycle 10 and the last cycle is growth.
RSS_GROWTH_TOLERANCE_MIB = 1.0


# --- /proc -----------------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB, from ``/proc/PID/status``."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"/proc/{pid}/status has no VmRSS line")


def parse_cpu_seconds(stat: str) -> float:
    """utime + stime in seconds from the text of ``/proc/PID/stat``."""
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    return parse_cpu_seconds(Path(f"/proc/{pid}/stat").read_text(encoding="utf-8"))


# --- the daemon process ----------------------------------------------------------------------------------


def config_text(
    state_dir: Path, profiles: Sequence[str], schedule: Mapping[str, float | int], embeddings: str = "none"
) -> str:
    """A configuration on the embedded store with one bank per profile and ``[embeddings]
    provider = embeddings``."""
    lines = [f'state_dir = "{state_dir}"', "", "[banks.global]", 'bank_id = "global"', ""]
    lines += ["[banks.shared]", 'bank_id = "shared"', ""]
    for name in profiles:
        lines += [f"[banks.{name}]", f'bank_id = "bank_{name}"', 'access = "read_write"', ""]
        lines += [f"[profiles.{name}]", f'bank = "{name}"', ""]
    lines.append("[schedule]")
    lines += [f"{key} = {value}" for key, value in schedule.items()]
    lines += ["", "[embeddings]", f'provider = "{embeddings}"']
    return "\n".join(lines) + "\n"


@functools.cache
def compile_package() -> None:
    """Compile every module of the ``dreamer`` package to bytecode beside its source, once.

    pip compiles a package's modules when it installs it, so a daemon started by systemd imports
    bytecode. This checkout is installed in place, and under ``PYTHONDONTWRITEBYTECODE=1`` no
    bytecode is ever written: each start, and each run's first imports, would compile the source
    again. (``PYTHONPYCACHEPREFIX`` would not do: it moves the bytecode of the standard library and
    of every installed package too, which would then be compiled again.)
    """
    done = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO_ROOT / "dreamer")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"compileall of the dreamer package failed: {(done.stdout + done.stderr)[-500:]}")


def child_environment(notify: NotifySocket, watchdog_usec: int) -> dict[str, str]:
    """The daemon's environment: the parent's without what a systemd unit sets, the notify socket,
    and the package's bytecode as pip installs it (:func:`installed_environment`)."""
    env = installed_environment(without_systemd(os.environ))
    env.update({"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": str(watchdog_usec), "PYTHONUNBUFFERED": "1"})
    return env


def installed_environment(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` for a process that imports the package as pip installs it: its bytecode compiled
    (:func:`compile_package`) and read."""
    compile_package()
    return {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Daemon:
    """One ``dreamer run`` child with its notify socket and its JSON log file."""

    config: Path
    log_path: Path
    watchdog_usec: int = 10_000_000
    notify: NotifySocket = field(default_factory=NotifySocket)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    def start(self) -> None:
        env = child_environment(self.notify, self.watchdog_usec)
        self._out = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dreamer", "run", "--config", str(self.config), "--log-format", "json"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]:
            try:
                record = json.loads(line[line.index("{") :]) if "{" in line else None
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    def finished_jobs(self) -> int:
        return sum(1 for r in self.records() if r.get("event") == "job finished")

    def signal(self, sig: signal.Signals) -> float:
        assert self.proc is not None
        sent = time.monotonic()
        self.proc.send_signal(sig)
        return sent

    def stop(self) -> tuple[float, float]:
        """SIGTERM; the seconds until ``STOPPING=1`` and until the process exited."""
        assert self.proc is not None
        after = len(self.notify)
        sent = self.signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise BenchError("the daemon did not exit within 60 s of SIGTERM") from None
        exited = time.monotonic() - sent
        if code != 0:
            raise BenchError(f"the daemon exited with status {code}; see {self.log_path}")
        stopping = self.notify.arrived_at(
            self.notify.wait_for(has("STOPPING", "1"), after=after, what="STOPPING=1", timeout=1)
        )
        return stopping - sent, exited

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE_S)
        if hasattr(self, "_out"):
            self._out.close()
        self.notify.close()


def wait_until(condition: Callable[[], bool], *, what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise BenchError(f"no {what} within {timeout:g}s")
        time.sleep(0.05)


# --- measurements -----------------------------------------------------------------------------------------


def floor_process(code: str, idle_s: float, settle_s: float = 0.5) -> dict[str, float]:
    """RSS and idle CPU of a plain Python process once it has run ``code`` and sleeps."""
    proc = subprocess.Popen(
        [sys.executable, "-c", f"{code}\nimport sys, time\nprint('ready', flush=True)\ntime.sleep(3600)"],
        cwd=REPO_ROOT,
        env=installed_environment(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise BenchError(f"the floor process running {code!r} did not start")
        time.sleep(settle_s)
        rss = rss_mib(proc.pid)
        cpu_before = cpu_seconds(proc.pid)
        time.sleep(idle_s)
        cpu = cpu_seconds(proc.pid) - cpu_before
    finally:
        proc.kill()
        proc.wait(timeout=DEADLINE_S)
        if proc.stdout is not None:
            proc.stdout.close()
    return {"rss_mib": rss, "idle_cpu_s": cpu, "idle_cpu_pct": 100 * cpu / idle_s}


def seed_banks(state_dir: Path, profiles: Sequence[str]) -> None:
    """A few memories in each profile bank, so the first cycle rolls them up and later ones are idle."""
    import asyncio

    from dreamer.backends.base import RetainItem
    from dreamer.backends.embedded.backend import EmbeddedBackend

    async def seed() -> None:
        backend = EmbeddedBackend(state_dir / "memory.sqlite3")
        try:
            for i, name in enumerate(profiles):
                await backend.retain(
                    f"bank_{name}",
                    [
                        RetainItem(content=f"Host node-{i} runs the {name} service on port {8000 + i}."),
                        RetainItem(content=f"The {name} profile prefers short answers with links."),
                    ],
                )
        finally:
            await backend.aclose()

    asyncio.run(seed())


def measure_idle(workdir: Path, idle_s: float, reloads: int, embeddings: str = "none") -> dict[str, Any]:
    """Start, idle, reload, drain: the daemon at its default hourly schedule."""
    profiles = ("research", "homelab", "coder")
    state_dir = workdir / "idle-state"
    seed_banks(state_dir, profiles)
    config = workdir / "idle.toml"
    config.write_text(
        config_text(
            state_dir,
            profiles,
            {"interval_minutes": 60.0, "jitter_s": 0, "first_run_delay_s": 0},
            embeddings,
        )
    )
    daemon = Daemon(config, workdir / "idle.log")
    try:
        progress("daemon: start, time to READY=1")
        daemon.start()
        ready_at = daemon.notify.arrived_at(daemon.notify.wait_for(has("READY", "1"), what="READY=1"))
        ready_s = ready_at - daemon.started_at
        rss_ready = rss_mib(daemon.pid)
        wait_until(lambda: daemon.finished_jobs() >= len(profiles), what="the first roll-up of every profile")
        time.sleep(1.0)
        rss_after_first = rss_mib(daemon.pid)
        progress(f"daemon: idle CPU over {idle_s:g} s")
        cpu_before = cpu_seconds(daemon.pid)
        time.sleep(idle_s)
        idle_cpu = cpu_seconds(daemon.pid) - cpu_before
        rss_idle = rss_mib(daemon.pid)
        watchdog_pings = daemon.notify.count(has("WATCHDOG"))
        progress(f"daemon: {reloads} SIGHUP reloads")
        latencies = []
        for _ in range(reloads):
            after = len(daemon.notify)
            sent = daemon.signal(signal.SIGHUP)
            index = daemon.notify.wait_for(has("RELOADING", "1"), after=after, what="RELOADING=1")
            ready = daemon.notify.arrived_at(
                daemon.notify.wait_for(has("READY", "1"), after=index + 1, what="READY=1 after reload")
            )
            latencies.append(ready - sent)
            time.sleep(0.2)
        progress("daemon: SIGTERM drain")
        stopping_s, drain_s = daemon.stop()
    finally:
        daemon.close()
    return {
        "ready_s": ready_s,
        "rss_ready_mib": rss_ready,
        "rss_after_first_cycle_mib": rss_after_first,
        "rss_idle_mib": rss_idle,
        "idle_s": idle_s,
        "idle_cpu_s": idle_cpu,
        "idle_cpu_pct": 100 * idle_cpu / idle_s,
        "watchdog_pings": watchdog_pings,
        "reload_s": latencies,
        "reload_median_s": statistics.median(latencies),
        "reload_max_s": max(latencies),
        "stopping_s": stopping_s,
        "drain_s": drain_s,
    }


def measure_cycles(workdir: Path, cycles: int, embeddings: str = "none") -> dict[str, Any]:
    """RSS over many short cycles of idle profiles."""
    profiles = ("research", "homelab", "coder")
    state_dir = workdir / "cycle-state"
    seed_banks(state_dir, profiles)
    config = workdir / "cycles.toml"
    config.write_text(
        config_text(
            state_dir,
            profiles,
            {"interval_minutes": 0.005, "jitter_s": 0, "first_run_delay_s": 0, "misfire_grace_s": 60},
            embeddings,
        )
    )
    checkpoints = sorted({1, 10, cycles // 4, cycles // 2, cycles} - {0})
    samples: list[dict[str, float]] = []
    daemon = Daemon(config, workdir / "cycles.log")
    try:
        progress(f"daemon: {cycles} cycles at a 0.3 s interval")
        daemon.start()
        daemon.notify.wait_for(has("READY", "1"), what="READY=1")
        cycle_started = time.monotonic()
        for checkpoint in checkpoints:
            wait_until(
                lambda c=checkpoint: daemon.finished_jobs() >= c * len(profiles),  # type: ignore[misc]
                what=f"{checkpoint} cycles",
                timeout=DEADLINE_S + checkpoint * 2.0,
            )
            samples.append(
                {
                    "cycle": checkpoint,
                    "rss_mib": rss_mib(daemon.pid),
                    "cpu_s": cpu_seconds(daemon.pid),
                    "elapsed_s": time.monotonic() - cycle_started,
                }
            )
        outcomes: dict[str, int] = {}
        for record in daemon.records():
            if record.get("event") == "job finished":
                outcome = str(record.get("outcome"))
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
        _, drain_s = daemon.stop()
    finally:
        daemon.close()
    by_cycle = {int(s["cycle"]): s["rss_mib"] for s in samples}
    return {
        "cycles": cycles,
        "profiles": len(profiles),
        "samples": samples,
        "outcomes": outcomes,
        "rss_growth_10_to_last_mib": by_cycle[cycles] - by_cycle.get(10, by_cycle[min(by_cycle)]),
        "drain_s": drain_s,
    }


# --- the command ---------------------------------------------------------------------------------


def targets(result: Mapping[str, Any]) -> list[str]:
    idle, cycles = result["idle"], result["cycles"]
    checks = [
        (f"READY within {TARGET_READY_S:g} s", idle["ready_s"] <= TARGET_READY_S, f"{idle['ready_s']:.2f} s"),
        (
            f"idle RSS at most {TARGET_RSS_MIB:g} MiB",
            idle["rss_idle_mib"] <= TARGET_RSS_MIB,
            f"{idle['rss_idle_mib']:.1f} MiB",
        ),
        (
            f"no RSS growth over cycles (at most {RSS_GROWTH_TOLERANCE_MIB:g} MiB "
            f"from cycle 10 to {cycles['cycles']})",
            cycles["rss_growth_10_to_last_mib"] <= RSS_GROWTH_TOLERANCE_MIB,
            f"{cycles['rss_growth_10_to_last_mib']:+.2f} MiB",
        ),
        (
            f"idle CPU at most {TARGET_IDLE_CPU_PCT:g}%",
            idle["idle_cpu_pct"] <= TARGET_IDLE_CPU_PCT,
            f"{idle['idle_cpu_pct']:.3f}%",
        ),
    ]
    return [f"{'met   ' if ok else 'MISSED'} {what}: {detail}" for what, ok, detail in checks]


def render(result: Mapping[str, Any]) -> str:
    idle, cycles, floors = result["idle"], result["cycles"], result["floors"]
    footprint = render_table(
        "Daemon footprint: dreamer run under a real NOTIFY_SOCKET, against plain Python processes",
        ["process", "READY s", "RSS MiB", "idle CPU s", "idle CPU %", "reload s (median/max)", "exit s"],
        [
            [
                "python -c 'import time; sleep'",
                None,
                floors["bare"]["rss_mib"],
                floors["bare"]["idle_cpu_s"],
                floors["bare"]["idle_cpu_pct"],
                None,
                None,
            ],
            [
                "python importing the daemon's modules",
                None,
                floors["imports"]["rss_mib"],
                floors["imports"]["idle_cpu_s"],
                floors["imports"]["idle_cpu_pct"],
                None,
                None,
            ],
            [
                f"dreamer run (3 idle profiles, hourly, embeddings {result.get('embeddings', 'none')})",
                idle["ready_s"],
                idle["rss_idle_mib"],
                idle["idle_cpu_s"],
                idle["idle_cpu_pct"],
                f"{idle['reload_median_s']:.3f}/{idle['reload_max_s']:.3f}",
                idle["drain_s"],
            ],
        ],
        [
            f"RSS of dreamer run: {idle['rss_ready_mib']:.1f} MiB at READY, "
            f"{idle['rss_after_first_cycle_mib']:.1f} after its first roll-ups, "
            f"{idle['rss_idle_mib']:.1f} after {idle['idle_s']:g} s idle",
            f"idle CPU over {idle['idle_s']:g} s with WATCHDOG_USEC=10 s "
            f"({idle['watchdog_pings']} watchdog pings so far); {len(idle['reload_s'])} reloads",
            f"SIGTERM: STOPPING=1 after {idle['stopping_s']:.3f} s, process exit (drain + teardown) "
            f"after {idle['drain_s']:.2f} s",
        ],
    )
    cycle_table = render_table(
        f"RSS over {cycles['cycles']} cycles of {cycles['profiles']} idle profiles "
        "(interval 0.3 s, no jitter)",
        ["cycle", "RSS MiB", "CPU s (cumulative)", "elapsed s"],
        [[int(s["cycle"]), s["rss_mib"], s["cpu_s"], s["elapsed_s"]] for s in cycles["samples"]],
        [
            "job outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(cycles["outcomes"].items())),
            f"RSS change from cycle 10 to {cycles['cycles']}: "
            f"{cycles['rss_growth_10_to_last_mib']:+.2f} MiB; drain after cycling: {cycles['drain_s']:.2f} s",
            *targets(result),
            machine_line(),
        ],
    )
    return footprint + "\n\n" + cycle_table


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    idle_s = 10.0 if args.quick else 60.0
    if args.idle_seconds is not None:
        idle_s = args.idle_seconds
    cycles = args.cycles
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="dreamer-bench-daemon-"))
    try:
        progress("daemon: floors (plain Python processes)")
        floors = {
            "bare": floor_process("pass", idle_s=min(idle_s, 10.0)),
            "imports": floor_process(
                "import dreamer.cli, dreamer.service.start, dreamer.service.plan, "
                "dreamer.backends.embedded.backend, dreamer.rollup.pipeline",
                idle_s=min(idle_s, 10.0),
            ),
        }
        idle = measure_idle(workdir, idle_s, reloads=3 if args.quick else 10, embeddings=args.embeddings)
        cycle_result = measure_cycles(workdir, cycles, embeddings=args.embeddings)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, Any] = {
        "benchmark": "daemon",
        "quick": args.quick,
        "embeddings": args.embeddings,
        "floors": floors,
        "idle": idle,
        "cycles": cycle_result,
        "total_wall_s": time.monotonic() - started,
        "machine": machine_info(),
    }
    result["targets"] = targets(result)
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.daemon", description="The daemon's footprint.")
    parser.add_argument(
        "--quick", action="store_true", help="10 s of idle CPU instead of 60 s, 3 reloads (CI size)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    parser.add_argument(
        "--cycles", type=int, default=100, help="roll-up cycles for the RSS curve (default 100)"
    )
    parser.add_argument("--idle-seconds", type=float, default=None, help="seconds of idle CPU measurement")
    parser.add_argument(
        "--embeddings",
        choices=("none", "auto"),
        default="none",
        help='the daemon\'s [embeddings] provider: "none" (default, the lexical dedup) or "auto" (the '
        "local model where it is installed)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return report(
        "bench.daemon",
        lambda: run_benchmark(args),
        render,
        as_json=args.json,
        errors=(BenchError, NotificationTimeout),
    )


if __name__ == "__main__":
    raise SystemExit(main())
