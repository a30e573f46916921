"""The real ``dreamer`` command in a subprocess, as a user's shell would run it: from the
repository, without systemd's notify socket, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_dreamer(
    config: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``dreamer ARGS --config CONFIG``; ``env`` is added to this process's environment. The timeout
    is a safety net against a hung child, not a performance bound."""
    environment = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dreamer", *args, "--config", str(config)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
