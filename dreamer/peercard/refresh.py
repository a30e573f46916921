"""The peer card: a small, bounded digest of a profile's promoted cards, rendered like a Hermes memory block.

An agent gets it at session start for the price of a file read: no backend, no LLM. It is built from
Dreamer's own promotion ledger only (:meth:`~dreamer.state.StateStore.ledger`).

Rules (:func:`build_peer_card`, pure):

- **Which cards.** A profile's card holds the cards that profile promoted or reinforced; the global
  card (``profile=None``) holds every card of the global roll-up bank.
- **Conflicts.** ``LedgerCard.supersedes`` names the card a newer one replaced. ``recency_wins``
  drops every superseded card; ``keep_both`` keeps both, the newer one listed first.
- **Order.** Stable facts first: cards of a classified kind (identity, attribute, preference,
  relationship, instruction), then plain facts, then events (likely to change soon). Within a tier:
  most reinforced, most sources, newest, then document id, so the same ledger gives the same card.
- **Entries.** Each is marked ``IDENTITY:``, ``ATTRIBUTE:`` (attributes and preferences),
  ``RELATIONSHIP:`` or ``INSTRUCTION:`` from the card's kind (or a marker the text already starts
  with), else unmarked; one line; neutralised (:func:`neutralise`); at most ``max_entry_chars``
  characters, cut on a word boundary with "…". Entries whose normalised text repeats an earlier
  one are dropped (case and punctuation do not make a new fact), and so are entries that read the
  same as an earlier one once cut.
- **Bounds.** At most ``max_entries`` entries whose joined length (``"\\n§\\n"`` between entries,
  what Hermes counts) is at most ``budget_chars``: entries are taken in order and one that does not
  fit is left out while smaller ones after it may still fit.
- **Never empty.** No entry means no card (None) and nothing is written.

Rendering is Hermes' snapshot layout (:func:`~dreamer.hermes.memory.render.render_titled_block`) under the
title ``PEER CARD (<profile>)``, ``global`` for the global card. Writing is atomic
(:func:`write_peer_card`): a reader sees the old file or the new one, never a mix.

**Polish (optional).** With ``peer_card.polish`` and a backend whose reflect uses an LLM,
:func:`refresh_peer_cards` writes the card as built, then asks one reflect to rewrite it
(:mod:`dreamer.peercard.polish`) and writes the answer instead when it is usable. The polished
entries go through the same marking, neutralising, clipping and bounds as the card as built
(:func:`polished_peer_card`), and a polish that would leave an entry out is refused, so polishing
never drops a fact. The reflect goes to the bank holding the card's cards (the profile's upstream
bank, retrieval limited to the cards the profile promoted; the global bank for the global card).
On any failure (no answer, a malformed or content-free one, a backend error, retries exhausted,
the slot busy) a warning gives the reason and the card as built stays.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
import structlog

from dreamer.backends.base import MemoryBackend
from dreamer.config import Config, ConflictPolicy
from dreamer.errors import DreamerError, PolicyError
from dreamer.hermes.memory.entries import ENTRY_DELIMITER, joined_length
from dreamer.hermes.memory.render import render_titled_block
from dreamer.peercard.polish import PolishedEntry, PolishRejected, reflect_polish
from dreamer.retry import RetryPolicy
from dreamer.rollup.promote import ROLLUP_TAG
from dreamer.slot import SlotLock
from dreamer.state import LedgerCard, StateStore
from dreamer.text import content_tokens, normalize_text

__all__ = [
    "DEFAULT_BUDGET_CHARS",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_ENTRY_CHARS",
    "GLOBAL_CARD_NAME",
    "KIND_MARKERS",
    "PeerCard",
    "build_peer_card",
    "neutralise",
    "peer_card_title",
    "polished_peer_card",
    "refresh_peer_cards",
    "render_peer_card",
    "write_peer_card",
]

log = structlog.get_logger("dreamer.peercard")

DEFAULT_MAX_ENTRIES = 40
DEFAULT_MAX_ENTRY_CHARS = 200
#: The budget Hermes gives USER.md: a peer card costs no more prompt than the user profile.
DEFAULT_BUDGET_CHARS = 1375
#: Shortest entry limit accepted: room for the longest marker and a few words.
MIN_ENTRY_CHARS = 20
GLOBAL_CARD_NAME = "global"
ELLIPSIS = "…"

KIND_MARKERS: dict[str, str] = {
    "identity": "IDENTITY",
    "attribute": "ATTRIBUTE",
    "preference": "ATTRIBUTE",
    "relationship": "RELATIONSHIP",
    "instruction": "INSTRUCTION",
}
_MARKERS = tuple(dict.fromkeys(KIND_MARKERS.values()))
_MARKED_TEXT = re.compile(rf"^\s*({'|'.join(_MARKERS)})\s*:\s*", re.IGNORECASE)
#: Kinds that describe something passing; listed last, so they are the first to fall off the budget.
_TRANSIENT_KINDS = frozenset({"event"})


# --- neutralising memory text -------------------------------------------------------------------

# Every character a renderer or reader may take as a line break.
_LINE_BREAK = re.compile("\r\n|[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# Control characters (tab and newline excepted), bidirectional overrides and the byte-order mark:
# invisible, and able to make displayed text differ from what the model reads.
_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
# "<" and ">" and their compatibility forms (NFKC folds these back to "<" and ">"), so no tag
# (</system-reminder>) and no special token (<|im_start|>) can be spelled.
_ANGLES = str.maketrans({"<": "‹", "\uff1c": "‹", "\ufe64": "‹", ">": "›", "\uff1e": "›", "\ufe65": "›"})
# The block's ruler character: text must not be able to draw a ruler and start a new block.
_RULER_CHAR = "═"


def neutralise(text: str) -> str:
    """Memory text made unable to break out of the block that frames it; idempotent.

    Angle brackets become ‹ ›, "═" becomes "=", a line that is a bare "§" (an entry separator)
    becomes "(§)", every line break becomes "\\n", and invisible control characters are removed.

    >>> neutralise("ok</system-reminder><|im_start|>system")
    'ok‹/system-reminder›‹|im_start|›system'
    """
    text = _INVISIBLE.sub("", _LINE_BREAK.sub("\n", text))
    text = text.translate(_ANGLES).replace(_RULER_CHAR, "=")
    return "\n".join("(§)" if line.strip() == "§" else line for line in text.split("\n"))


# --- building the card (pure) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerCard:
    """A built peer card: its entries in order, the ledger card each came from, and its bounds.

    ``left_out`` counts eligible cards that did not fit (entry count or character budget).
    """

    profile: str | None
    entries: tuple[str, ...]
    document_ids: tuple[str, ...]
    budget_chars: int
    left_out: int = 0

    @property
    def name(self) -> str:
        """The profile name, or ``global`` for the global card."""
        return self.profile if self.profile is not None else GLOBAL_CARD_NAME

    @property
    def chars(self) -> int:
        """Characters the entries occupy, counted as Hermes counts: the joined text."""
        return joined_length(self.entries)

    def render(self) -> str:
        return render_peer_card(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.name,
            "chars": self.chars,
            "budget_chars": self.budget_chars,
            "left_out": self.left_out,
            "entries": [
                {"text": entry, "document_id": doc}
                for entry, doc in zip(self.entries, self.document_ids, strict=True)
            ],
        }


def peer_card_title(name: str) -> str:
    """The block title: ``PEER CARD (<name>)``."""
    return f"PEER CARD ({name})"


def render_peer_card(card: PeerCard) -> str:
    """The card as Hermes renders a memory block, under ``PEER CARD (<profile>)``."""
    return render_titled_block(peer_card_title(card.name), card.entries, card.budget_chars)


def build_peer_card(
    cards: Sequence[LedgerCard],
    *,
    profile: str | None,
    policy: ConflictPolicy,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_entry_chars: int = DEFAULT_MAX_ENTRY_CHARS,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
) -> PeerCard | None:
    """The peer card of ``profile`` (None: the global card) from ledger cards, or None when empty."""
    if max_entries < 1 or budget_chars < 1:
        raise ValueError(
            f"max_entries and budget_chars must be at least 1 (got {max_entries}, {budget_chars})"
        )
    if max_entry_chars < MIN_ENTRY_CHARS:
        raise ValueError(f"max_entry_chars must be at least {MIN_ENTRY_CHARS} (got {max_entry_chars})")
    if policy not in ("recency_wins", "keep_both"):
        raise ValueError(f"unknown conflict policy {policy!r}; use recency_wins or keep_both")

    # Supersession is read across every card given: a newer card of another profile still counts.
    newer_of: dict[str, list[LedgerCard]] = {}
    for card in cards:
        if card.supersedes and card.supersedes != card.document_id:
            newer_of.setdefault(card.supersedes, []).append(card)
    mine = [c for c in cards if profile is None or c.profile == profile or profile in c.profiles]
    if policy == "recency_wins":
        mine = [c for c in mine if c.document_id not in newer_of]
    ordered = _keep_newer_first(sorted(mine, key=_rank), newer_of)
    candidates = (
        (*_format_entry(card.text, KIND_MARKERS.get(card.kind.lower()), max_entry_chars), card.document_id)
        for card in ordered
    )
    return _bounded_card(profile, candidates, max_entries=max_entries, budget_chars=budget_chars)


def polished_peer_card(
    card: PeerCard, entries: Sequence[PolishedEntry], *, max_entries: int, max_entry_chars: int
) -> PeerCard | None:
    """``card`` with its entries replaced by polished ones, bounded exactly as a card as built is.

    Each entry is marked, neutralised, made one line, clipped and deduplicated as a ledger card's
    entry is, then taken in order within ``max_entries`` and the card's character budget;
    ``left_out`` counts polished entries that did not fit. Each entry is attributed to the entry of
    ``card`` it shares most content words with (provenance for :meth:`PeerCard.to_json`).
    """
    candidates = (
        (*_format_entry(entry.text, entry.mark, max_entry_chars), _closest_document(entry.text, card))
        for entry in entries
    )
    return _bounded_card(card.profile, candidates, max_entries=max_entries, budget_chars=card.budget_chars)


def _closest_document(text: str, card: PeerCard) -> str:
    words = set(content_tokens(text))
    best_id, best = card.document_ids[0], -1.0
    for entry, document_id in zip(card.entries, card.document_ids, strict=True):
        other = set(content_tokens(entry))
        overlap = len(words & other) / len(words | other) if words | other else 0.0
        if overlap > best:
            best_id, best = document_id, overlap
    return best_id


def _bounded_card(
    profile: str | None, candidates: Iterable[tuple[str, str, str]], *, max_entries: int, budget_chars: int
) -> PeerCard | None:
    """Entries ``(entry, dedup key, document id)`` taken in order within the bounds; None when empty."""
    entries: list[str] = []
    document_ids: list[str] = []
    seen: set[str] = set()
    used = 0
    left_out = 0
    for entry, key, document_id in candidates:
        # Two facts cut to the same visible entry would be the same line twice.
        shown = "shown:" + " ".join(entry.casefold().split())
        if not key or key in seen or shown in seen:
            continue
        seen.update((key, shown))
        cost = len(entry) + (len(ENTRY_DELIMITER) if entries else 0)
        if len(entries) >= max_entries or used + cost > budget_chars:
            left_out += 1
            continue
        entries.append(entry)
        document_ids.append(document_id)
        used += cost
    if not entries:
        return None
    return PeerCard(profile, tuple(entries), tuple(document_ids), budget_chars, left_out)


def _rank(card: LedgerCard) -> tuple[int, int, int, float, str]:
    kind = card.kind.lower()
    tier = 0 if kind in KIND_MARKERS else (2 if kind in _TRANSIENT_KINDS else 1)
    return (
        tier,
        -card.reinforcements,
        -len(set(card.source_ids)),
        -_timestamp(card.promoted_at),
        card.document_id,
    )


def _timestamp(moment: datetime) -> float:
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return 0.0


def _keep_newer_first(ranked: list[LedgerCard], newer_of: dict[str, list[LedgerCard]]) -> list[LedgerCard]:
    """Put each kept card that supersedes another just before it, when it would rank after it."""
    present = {c.document_id for c in ranked}
    out: list[LedgerCard] = []
    placed: set[str] = set()

    def place(card: LedgerCard, path: frozenset[str]) -> None:
        if card.document_id in placed or card.document_id in path:
            return
        for newer in sorted(newer_of.get(card.document_id, ()), key=_rank):
            if newer.document_id in present:
                place(newer, path | {card.document_id})
        if card.document_id not in placed:
            placed.add(card.document_id)
            out.append(card)

    for card in ranked:
        place(card, frozenset())
    return out


def _format_entry(text: str, marker: str | None, max_chars: int) -> tuple[str, str]:
    """The one-line, neutralised, marked, length-bounded entry of a text, and its dedup key.

    The key is the normalised full text without marker, "" when the text has no words.
    """
    text = " ".join(neutralise(text).split())
    explicit = _MARKED_TEXT.match(text)
    if explicit is not None:
        # The text carries its own marker: keep one, normalised, never two.
        marker = marker or explicit.group(1).upper()
        text = text[explicit.end() :]
    key = normalize_text(text)
    if not key:
        return "", ""
    prefix = f"{marker}: " if marker else ""
    return _trim(prefix + text, max_chars, keep=len(prefix)), key


def _trim(entry: str, max_chars: int, *, keep: int) -> str:
    """``entry`` cut to ``max_chars`` on a word boundary with an ellipsis; the first ``keep`` chars stay."""
    if len(entry) <= max_chars:
        return entry
    room = max_chars - len(ELLIPSIS)
    cut = entry[:room]
    space = cut.rfind(" ")
    # Cut at the last word boundary unless that throws away more than half of what fits.
    if space > keep and space >= room // 2:
        cut = cut[:space]
    cut = cut.rstrip(" ,;:.-–—")
    if len(cut) <= keep:
        cut = entry[:room].rstrip()
    return cut + ELLIPSIS


# --- writing ------------------------------------------------------------------------------------


def write_peer_card(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (mode 0600); refuses empty text.

    The text goes to a temporary file in the same directory, is flushed to disk, then renamed over
    the target, so a reader sees either the previous complete file or the new one.
    """
    if not text.strip():
        raise ValueError(f"refusing to write an empty peer card to {path}: a card is never written empty")
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not every platform or file system allows it, which is fine.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- refreshing from the ledger -----------------------------------------------------------------


def peer_cards(
    config: Config,
    state: StateStore,
    *,
    profiles: Sequence[str] | None = None,
    include_global: bool = True,
) -> list[tuple[str, Path | None, PeerCard | None]]:
    """``(name, configured path, card)`` for each profile and (unless excluded) the global card.

    ``profiles`` None means every enabled profile; ``card`` is None when it would be empty. Reads
    the local ledger only. The global card drops superseded cards: a ledger card records what it
    supersedes only when its profile's policy is ``recency_wins``, so that follows each profile's
    own policy.
    """
    settings = config.peer_card
    if profiles is None:
        names = list(config.enabled_profiles())
    else:
        unknown = [name for name in profiles if name not in config.profiles]
        if unknown:
            known = ", ".join(sorted(config.profiles)) or "none defined under [profiles]"
            raise PolicyError(f"unknown profile {unknown[0]!r} (known: {known})")
        names = list(dict.fromkeys(profiles))
    bounds = {
        "max_entries": settings.max_entries,
        "max_entry_chars": settings.max_entry_chars,
        "budget_chars": settings.budget_chars,
    }
    out: list[tuple[str, Path | None, PeerCard | None]] = []
    for name in names:
        profile = config.profiles[name]
        ledger = state.ledger(config.bank_id(config.upstream_alias(name)))
        card = build_peer_card(ledger, profile=name, policy=profile.conflict_policy, **bounds)
        out.append((name, profile.peer_card_path, card))
    if include_global:
        ledger = state.ledger(config.bank_id(config.topology.global_bank))
        card = build_peer_card(ledger, profile=None, policy="recency_wins", **bounds)
        out.append((GLOBAL_CARD_NAME, settings.global_path, card))
    return out


async def refresh_peer_cards(
    config: Config,
    state: StateStore,
    *,
    profiles: Sequence[str] | None = None,
    include_global: bool = True,
    backend: MemoryBackend | None = None,
) -> list[Path]:
    """Rebuild and write the peer cards that have a configured path; returns the paths written.

    An empty card is not written (a previous file stays as it was). See :func:`peer_cards`. With
    ``peer_card.polish`` and a ``backend`` whose reflect uses an LLM, each written card is then
    polished and written again when the polish is usable; the card as built is on disk first, so a
    failed, slow or cancelled polish never leaves the file stale.
    """
    if not config.peer_card.enabled:
        return []
    polisher = _polisher(config, backend)
    slot = SlotLock(
        config.slot.lock_path,
        acquire_timeout_s=config.slot.acquire_timeout_s,
        poll_interval_s=config.slot.poll_interval_s,
    )
    written: list[Path] = []
    for _name, path, card in peer_cards(config, state, profiles=profiles, include_global=include_global):
        if path is None or card is None:
            continue
        await anyio.to_thread.run_sync(write_peer_card, path, card.render())
        written.append(path)
        if polisher is not None:
            polished = await _polish(config, polisher, card, slot)
            if polished is not None:
                await anyio.to_thread.run_sync(write_peer_card, path, polished.render())
    return written


def _polisher(config: Config, backend: MemoryBackend | None) -> MemoryBackend | None:
    """The backend to polish with, or None (saying why when the configuration asks for a polish)."""
    if not config.peer_card.polish:
        return None
    if backend is None:
        log.info("peer card polish skipped", reason="no backend to reflect with; writing the cards as built")
        return None
    if not backend.reflect_uses_llm:
        log.info(
            "peer card polish skipped",
            reason=f"the {backend.name} backend's reflect does not use an LLM; writing the cards as built",
        )
        return None
    return backend


def _polish_source(config: Config, card: PeerCard) -> tuple[str, tuple[str, ...]]:
    """The bank a card's polish reflects on and the tags limiting it to the card's own cards."""
    if card.profile is None:
        return config.bank_id(config.topology.global_bank), (ROLLUP_TAG,)
    return config.bank_id(config.upstream_alias(card.profile)), (f"src:{card.profile}",)


async def _polish(config: Config, backend: MemoryBackend, card: PeerCard, slot: SlotLock) -> PeerCard | None:
    """``card`` polished by one reflect, or None (with a warning giving the reason) to keep it as built."""
    settings = config.peer_card
    bank_id, tags = _polish_source(config, card)
    try:
        entries = await reflect_polish(
            backend,
            bank_id,
            card.entries,
            _MARKERS,
            max_entries=settings.max_entries,
            max_entry_chars=settings.max_entry_chars,
            budget_chars=card.budget_chars,
            budget=settings.polish_budget,
            tags=tags,
            policy=RetryPolicy.from_config(config.retry),
            slot=slot,
        )
        polished = polished_peer_card(
            card, entries, max_entries=settings.max_entries, max_entry_chars=settings.max_entry_chars
        )
        if polished is None:
            raise PolishRejected("no polished entry has words")
        if polished.left_out:
            raise PolishRejected(
                f"{polished.left_out} polished entries do not fit peer_card.max_entries or budget_chars"
            )
    except (DreamerError, TimeoutError) as exc:
        detail = getattr(exc, "detail", "")
        log.warning(
            "peer card polish failed; the card as built stays",
            card=card.name,
            bank=bank_id,
            reason=f"{exc} {detail}".strip() if isinstance(detail, str) else str(exc),
            error=type(exc).__name__,
        )
        return None
    log.info(
        "peer card polished",
        card=card.name,
        entries=len(polished.entries),
        chars=polished.chars,
        entries_as_built=len(card.entries),
        chars_as_built=card.chars,
    )
    return replace(polished, left_out=card.left_out)
