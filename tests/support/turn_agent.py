"""An agent process for the turn spool's tests: Dreamer's Hermes provider, initialised as Hermes does
in the Hermes home given, syncing numbered turns.

``python -m tests.support.turn_agent HOME SESSION COUNT hold`` syncs the turns, prints
``spooled <turns waiting>`` and waits to be killed; ``... run`` syncs them, shuts the provider down
as Hermes does at exit and prints its turn statistics as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

from dreamer.hermes_provider.provider import DreamerMemoryProvider


def main(home: str, session: str, count: int, mode: str) -> None:
    provider = DreamerMemoryProvider()
    provider.initialize(session, hermes_home=home, agent_identity="default")
    memory = provider.memory
    assert memory is not None and memory.turns is not None, provider.problem
    for i in range(count):
        provider.sync_turn(f"{session} question {i}", f"{session} answer {i}", session_id=session)
    if mode == "hold":
        print(f"spooled {memory.turns.depth().turns}", flush=True)
        while True:
            time.sleep(60)
    provider.shutdown()
    print(json.dumps(dataclasses.asdict(memory.turns.stats)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
