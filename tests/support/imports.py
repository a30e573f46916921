"""Which modules a fresh interpreter has loaded after some imports: what startup and a run cost."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

#: What neither the command line nor the daemon's start may load: the jobs' bodies and httpx.
JOB_BODIES = (
    "dreamer.rollup.pipeline",
    "dreamer.backends.hindsight.backend",
    "dreamer.hermes",
    "dreamer.commands",
    "dreamer.peercard.card",
    "httpx",
)


def loaded_after(setup: str, modules: Sequence[str]) -> list[str]:
    """Run ``setup`` (Python statements) in a new interpreter; the ``modules`` it then holds."""
    probe = f"import sys\n{setup}\nprint(' '.join(m for m in {list(modules)!r} if m in sys.modules))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()
