"""The pure parts: reading VmHWM, the longest watchdog gap, and the targets met or missed."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._common import BenchError

#: The goals of the indexed-dedup work: judged at the largest size measured (the goal is for 1M).
TARGET_RUN_S = 1.0
TARGET_PEAK_RSS_MIB = 150.0
TARGET_FLAT_RATIO = 2.0
TARGET_WATCHDOG_GAP_S = 1.0
TARGET_RECALL_MS = 50.0


def parse_vm_hwm_mib(status: str) -> float:
    """Peak resident set size (``VmHWM``) in MiB from the text of ``/proc/PID/status``."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) / 1024
    raise BenchError("/proc/PID/status has no VmHWM line")


def vm_hwm_mib(pid: int) -> float:
    return parse_vm_hwm_mib(Path(f"/proc/{pid}/status").read_text(encoding="utf-8"))


def longest_gap(times: Sequence[float]) -> float | None:
    """The longest interval between consecutive moments (sorted first); None with fewer than two."""
    ordered = sorted(times)
    if len(ordered) < 2:
        return None
    return max(b - a for a, b in itertools.pairwise(ordered))


def targets(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One ``met``/``MISSED`` line per goal; the per-size goals are judged at the largest size."""
    if not rows:
        return []
    rows = sorted(rows, key=lambda r: r["cards"])
    small, large = rows[0], rows[-1]
    at = f"{large['cards']} cards" + ("" if large["cards"] >= 1_000_000 else " (the goal is for 1M)")
    checks: list[tuple[str, bool, str]] = [
        (
            f"run at most {TARGET_RUN_S:g} s wall at {at}",
            large["run_s"] <= TARGET_RUN_S,
            f"{large['run_s']:.2f} s",
        ),
        (
            f"peak RSS at most {TARGET_PEAK_RSS_MIB:g} MiB at {at}",
            large["peak_rss_mib"] <= TARGET_PEAK_RSS_MIB,
            f"{large['peak_rss_mib']:.0f} MiB",
        ),
    ]
    if large.get("recall_ms") is not None:
        checks.append(
            (
                f"recall at most {TARGET_RECALL_MS:g} ms at {at}",
                large["recall_ms"] <= TARGET_RECALL_MS,
                f"{large['recall_ms']:.1f} ms (one tier: {large['recall_one_tier_ms']:.1f} ms)",
            )
        )
    if len(rows) > 1:
        ratio = large["run_s"] / small["run_s"] if small["run_s"] > 0 else float("inf")
        checks.append(
            (
                f"cost per run flat within {TARGET_FLAT_RATIO:g}x "
                f"from {small['cards']} to {large['cards']} cards",
                ratio <= TARGET_FLAT_RATIO,
                f"{ratio:.1f}x ({small['run_s']:.2f} s -> {large['run_s']:.2f} s)",
            )
        )
    gaps = [(r["watchdog_gap_s"], r["cards"]) for r in rows if r["watchdog_gap_s"] is not None]
    if gaps:
        gap, cards = max(gaps)
        checks.append(
            (
                f"longest watchdog gap at most {TARGET_WATCHDOG_GAP_S:g} s",
                gap <= TARGET_WATCHDOG_GAP_S,
                f"{gap:.2f} s (at {cards} cards)",
            )
        )
    return [f"{'met   ' if ok else 'MISSED'} {what}: {detail}" for what, ok, detail in checks]
