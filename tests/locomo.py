"""Real sentences from the LoCoMo conversations, loaded by reference instead of copied into the tests.

LoCoMo (snap-research/locomo, "Evaluating Very Long-Term Conversational Memory of LLM Agents") is research
benchmark data: tests read it from where it lies and never keep its text. A test names a sentence by its
position, and `sentence` loads it:

- `("26", "session_1_observation", "Caroline", 3)`: fact 3 (0-based) of Caroline's observations in session 1
  of conversation `26.json` (the fact text, element 0 of the `[fact, dia_id]` pair);
- `("26", "events_session_3", "Caroline", 0)`: event 0 of Caroline in session 3;
- `("26", "session_2_summary", 4)`: sentence 4 of the session 2 summary, as cut by `split_sentences`.

The data directory is `$DREAMER_LOCOMO_DIR`, else `shared/data/locomo` beside the repository (CI puts a copy
of `shared/` next to the clone). Without it, tests that load a sentence are skipped with the reason;
tests that load none run as usual.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bench.locomo.data import split_sentences  # the benchmark's own cut, so references name its sentences

#: Environment variable naming the directory that holds `<conversation id>.json`.
DATA_DIR_ENV = "DREAMER_LOCOMO_DIR"

#: Where the data lies when the variable is unset: `shared/data/locomo` next to the repository.
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"

#: A sentence by position: (conversation, key, speaker, index) for observations and events,
#: (conversation, key, index) for summaries.
Ref = tuple[str, str, str, int] | tuple[str, str, int]


class LocomoRefError(LookupError):
    """A reference that names no sentence in the data (a wrong key, speaker or index)."""


def data_dir() -> Path:
    """The LoCoMo directory: `$DREAMER_LOCOMO_DIR` if set, else the default beside the repository."""
    configured = os.environ.get(DATA_DIR_ENV)
    return Path(configured) if configured else DEFAULT_DATA_DIR


def missing_reason() -> str | None:
    """Why LoCoMo tests cannot run here, or None when the data directory exists."""
    directory = data_dir()
    if directory.is_dir():
        return None
    return (
        f"LoCoMo data not found at {directory}; set {DATA_DIR_ENV} to a directory of <id>.json "
        "conversations (from snap-research/locomo on GitHub, data/locomo10.json: one file per "
        "conversation, named by its sample_id's number; research data, never copied into this repository)"
    )


#: Marks a test (or a `pytest.param`) that needs the data, for tests that cannot call `sentence` first
#: (property tests, whose examples must not start before the skip).
requires_locomo = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


def require_data() -> Path:
    """The data directory, or skip the calling test with the reason and the variable to set."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return data_dir()


@cache
def _conversation(directory: Path, conversation: str) -> dict[str, Any]:
    """One conversation file, parsed once per run."""
    path = directory / f"{conversation}.json"
    if not path.is_file():
        raise LocomoRefError(f"no conversation file {path}; check the conversation id of the reference")
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@cache
def _summary_sentences(directory: Path, conversation: str, key: str) -> tuple[str, ...]:
    """The sentences of one session summary, split once per run."""
    summary = _conversation(directory, conversation).get(key)
    if not isinstance(summary, str):
        raise LocomoRefError(f"conversation {conversation} has no summary {key!r}")
    return tuple(split_sentences(summary))


def _pick(items: Any, index: int, ref: Ref) -> str:
    """Item `index` of a list from the data, as text."""
    if not isinstance(items, list) or not 0 <= index < len(items):
        raise LocomoRefError(f"{ref} names no sentence: index out of range or unknown speaker")
    item = items[index]
    # Observations are [fact, evidence] pairs; events are plain strings.
    text = item[0] if isinstance(item, list) else item
    if not isinstance(text, str):
        raise LocomoRefError(f"{ref} names {type(text).__name__}, not text")
    return text


def sentence(ref: Ref) -> str:
    """The sentence `ref` names; skips the test when the data is absent (see the module docstring)."""
    directory = require_data()
    if len(ref) == 3:
        conversation, key, index = ref
        if not key.endswith("_summary"):
            raise LocomoRefError(f"{ref}: a 3-part reference names a summary sentence (session_N_summary)")
        return _pick(list(_summary_sentences(directory, conversation, key)), index, ref)
    conversation, key, speaker, position = ref
    if not (key.endswith("_observation") or key.startswith("events_session_")):
        raise LocomoRefError(f"{ref}: a 4-part reference names an observation or an event")
    section = _conversation(directory, conversation).get(key)
    if not isinstance(section, dict):
        raise LocomoRefError(f"conversation {conversation} has no {key!r}")
    return _pick(section.get(speaker), position, ref)


def ref_id(value: object) -> str | None:
    """A readable pytest id for a parametrized reference ("26:session_1_observation:Caroline:3")."""
    return ":".join(str(part) for part in value) if isinstance(value, tuple) else None


def edited(ref: Ref, old: str, new: str) -> str:
    """The sentence at `ref` with `old` replaced by `new`: a hand-made variant of a real sentence.

    Refuses an edit that changes nothing, so a variant can never silently equal its original.
    """
    original = sentence(ref)
    if old not in original:
        raise LocomoRefError(f"{old!r} is not in the sentence at {ref}; the edit would change nothing")
    return original.replace(old, new)
