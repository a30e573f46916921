"""Canary lines: fixed markers whose presence proves a memory file was not rewritten wholesale.

Each of an agent's two memory files carries a line containing `CANARY_MARKER`. An audit refuses to
touch anything when one is missing, never edits the entry holding it, and checks afterwards that
the same canary lines are still there.

Every ledger block records a fingerprint of each file's canary lines, so a canary that changed
between audits is caught too: by hand, or because a stale copy of the file was put back. A rotation
(:mod:`dreamer.hermes.audit.rotation`) is the one legitimate change: it gives both files a new token
and records the new fingerprints. `canary_breach` is the pure verdict; why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence

from dreamer.hermes.audit.ledger import LedgerEntry

__all__ = [
    "CANARY_MARKER",
    "ROTATED",
    "ROTATING",
    "canary_breach",
    "canary_fingerprint",
    "canary_lines",
    "is_canary_entry",
    "is_own_canary_line",
    "last_canary_block",
    "new_canary_token",
    "with_canary_token",
]

CANARY_MARKER = "CANARY: Do not modify this line"
#: Ledger statuses of a rotation: its intent (written before the files) and its end (after both).
ROTATING = "ROTATING"
ROTATED = "ROTATED"
_TOKEN_BYTES = 6


def canary_lines(raw: str) -> tuple[str, ...]:
    """Every line of `raw` that contains the canary marker, verbatim and in order."""
    return tuple(line for line in raw.splitlines() if CANARY_MARKER in line)


def is_canary_entry(entry: str) -> bool:
    """True if `entry` holds a canary line and must therefore never be changed or removed."""
    return CANARY_MARKER in entry


def canary_fingerprint(lines: Sequence[str]) -> str:
    """A short fingerprint of a file's canary lines (what the ledger records instead of the lines)."""
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def new_canary_token() -> str:
    """A fresh random canary token (12 hex digits)."""
    return secrets.token_hex(_TOKEN_BYTES)


#: What may follow the marker on a canary line of its own: nothing, a token in parentheses or one
#: word ("(token 3f2a…)", "mem-1"). A line with more after the marker quotes it: an entry's text.
_CANARY_TAIL = re.compile(r"\s*(?:\([^()\n]{0,60}\)|[^\s()]{1,40})?\s*")


def is_own_canary_line(line: str) -> bool:
    """Whether ``line`` is a canary line itself (the marker and at most a token after it), not an
    entry that quotes the marker mid-text."""
    at = line.find(CANARY_MARKER)
    return at >= 0 and _CANARY_TAIL.fullmatch(line[at + len(CANARY_MARKER) :]) is not None


def with_canary_token(raw: str, token: str) -> str:
    """`raw` with every canary line of its own ending in `token`: what comes before the marker is
    kept, and a line that quotes the marker inside other text is left exactly as it is."""
    lines = raw.split("\n")
    for i, line in enumerate(lines):
        if is_own_canary_line(line):
            lines[i] = line[: line.index(CANARY_MARKER)] + f"{CANARY_MARKER} (token {token})"
    return "\n".join(lines)


def last_canary_block(ledger: Sequence[LedgerEntry]) -> LedgerEntry | None:
    """The newest ledger block that recorded canary fingerprints, None before the first."""
    for entry in reversed(ledger):
        if "canary_memory" in entry.fields and "canary_user" in entry.fields:
            return entry
    return None


def _last_token(ledger: Sequence[LedgerEntry]) -> str:
    for entry in reversed(ledger):
        if entry.status == ROTATED and entry.fields.get("canary_token"):
            return entry.fields["canary_token"]
    return ""


def canary_breach(memory_fp: str, user_fp: str, ledger: Sequence[LedgerEntry]) -> str:
    """Why the canaries with these fingerprints are not the ones the ledger expects, "" if they are.

    An unfinished rotation is always a breach: the files may be half rotated, and accepting either
    token would let a stale copy pass.
    """
    last = last_canary_block(ledger)
    if last is None:
        return ""
    stamp = last.timestamp.isoformat(timespec="seconds")
    if last.status == ROTATING:
        held = []
        for name, current, key in (("MEMORY.md", memory_fp, "memory"), ("USER.md", user_fp, "user")):
            if current == last.fields.get(f"canary_{key}"):
                state = "the new canary"
            elif current == last.fields.get(f"canary_{key}_before"):
                state = "the old canary"
            else:
                state = "a canary of neither"
            held.append(f"{name} holds {state}")
        return (
            f"the canary rotation started at {stamp} did not finish ({'; '.join(held)}); "
            "run `dreamer audit --rotate-canary` for this agent to finish it with a fresh token"
        )
    pairs = (("MEMORY.md", memory_fp, "canary_memory"), ("USER.md", user_fp, "canary_user"))
    changed = [name for name, current, key in pairs if current != last.fields[key]]
    if not changed:
        return ""
    token = _last_token(ledger)
    restore = f"restore the line ending in '(token {token})'" if token else "restore the canary line"
    return (
        f"the canary line of {' and '.join(changed)} changed outside a rotation since {stamp}: edited "
        f"by hand, or a stale copy of the file was put back. Nothing was changed; {restore}, "
        "then rerun the audit"
    )
