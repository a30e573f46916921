"""The threat scan: Hermes' prompt-injection and exfiltration patterns, and what Dreamer does with
text it puts into an agent's context.

`scan_for_threats` is Hermes' own memory scan (hermes-agent 0.19.0, `tools/threat_patterns.py`, MIT
licence, the patterns of its "strict" scope, which its memory tool blocks); keep the table in step
when Hermes changes it. It is the one copy: the MEMORY.md store (`dreamer.hermes.memory.threats`)
and every text Dreamer injects use it. One deliberate difference: several invisible characters
found in one text are listed by code point (Hermes lists them in set order, which varies between
processes).

Text Dreamer injects (the peer card, the prelude and bank descriptions, the per-turn recall, tool
results) is scanned by `prompt_threats`, which finds more than Hermes' scan of the same text: the
patterns are also matched with invisible characters removed (``ig<ZWSP>nore all previous
instructions``) and with Unicode tag characters read as the ASCII they smuggle, and across the lines
of a block. The zero-width joiner inside an emoji sequence is not a threat. Then `withhold_lines`
replaces each flagged line by a placeholder naming the patterns (the system prompt, the per-turn
recall: the agent is not instructed by memory text), `mark_lines` and `flagged` mark it (tool
results: the model asked), and either escapes control and format characters visibly. Why:
``docs/design/readside.md``.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable, Sequence

from dreamer.text import printable

__all__ = [
    "INVISIBLE_CHARS",
    "MAX_SCAN_CHARS",
    "flagged",
    "mark_lines",
    "prompt_threats",
    "scan_for_threats",
    "withheld",
    "withhold_lines",
]

#: Hermes scans only the first 64 KiB of a text.
MAX_SCAN_CHARS = 65_536

_FILLER = r"(?:\w+\s+){0,8}"

# (regex, pattern id) in Hermes' order; every scope ("all", "context", "strict") applies to memory.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (rf"ignore\s+{_FILLER}(previous|all|above|prior)\s+{_FILLER}instructions", "prompt_injection"),
    (r"system\s+prompt\s+override", "sys_prompt_override"),
    (rf"disregard\s+{_FILLER}(your|all|any)\s+{_FILLER}(instructions|rules|guidelines)", "disregard_rules"),
    (
        rf"act\s+as\s+(if|though)\s+{_FILLER}you\s+{_FILLER}(have\s+no|don\'t\s+have)\s+{_FILLER}"
        r"(restrictions|limits|rules)",
        "bypass_restrictions",
    ),
    (r"<!--[^>]{0,512}(?:ignore|override|system|secret|hidden)[^>]{0,512}-->", "html_comment_injection"),
    (r"""<\s*div\s+style\s*=\s*["\'][^>]{0,2048}display\s*:\s*none""", "hidden_div"),
    (r"translate\s+[^\n]{0,512}\s+into\s+[^\n]{0,512}\s+and\s+(execute|run|eval)", "translate_execute"),
    (rf"do\s+not\s+{_FILLER}tell\s+{_FILLER}the\s+user", "deception_hide"),
    (rf"you\s+are\s+{_FILLER}now\s+(?:a|an|the)\s+", "role_hijack"),
    (rf"pretend\s+{_FILLER}(you\s+are|to\s+be)\s+", "role_pretend"),
    (rf"output\s+{_FILLER}(system|initial)\s+prompt", "leak_system_prompt"),
    (
        rf"(respond|answer|reply)\s+without\s+{_FILLER}(restrictions|limitations|filters|safety)",
        "remove_filters",
    ),
    (rf"you\s+have\s+been\s+{_FILLER}(updated|upgraded|patched)\s+to", "fake_update"),
    (r"\bname\s+yourself\s+\w+", "identity_override"),
    (r"register\s+(as\s+)?a?\s*node", "c2_node_registration"),
    (r"(heartbeat|beacon|check[\s\-]?in)\s+(to|with)\s+", "c2_heartbeat"),
    (r"pull\s+(down\s+)?(?:new\s+)?task(?:ing|s)?\b", "c2_task_pull"),
    (r"connect\s+to\s+the\s+network\b", "c2_network_connect"),
    (r"you\s+must\s+(?:\w+\s+){0,3}(register|connect|report|beacon)\b", "forced_action"),
    (r"only\s+use\s+one[\s\-]?liners?\b", "anti_forensic_oneliner"),
    (rf"never\s+{_FILLER}(?:create|write)\s+{_FILLER}(?:script|file)\s+{_FILLER}disk", "anti_forensic_disk"),
    (r"unset\s+\w*(?:CLAUDE|CODEX|HERMES|AGENT|OPENAI|ANTHROPIC)\w*", "env_var_unset_agent"),
    (r"\b(?:cobalt\s*strike|sliver|havoc|mythic|metasploit|brainworm)\b", "known_c2_framework"),
    (r"\bc2\s+(?:server|channel|infrastructure|beacon)\b", "c2_explicit"),
    (r"\bcommand\s+and\s+control\b", "c2_explicit_long"),
    (r"curl\s+[^\n]{0,2048}\$\{?\w*(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|API)", "exfil_curl"),
    (r"wget\s+[^\n]{0,2048}\$\{?\w*(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|API)", "exfil_wget"),
    (r"cat\s+[^\n]{0,2048}(\.env|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)", "read_secrets"),
    (r"(send|post|upload|transmit)\s+[^\n]{0,2048}\s+(to|at)\s+https?://", "send_to_url"),
    (
        rf"(include|output|print|share)\s+{_FILLER}(conversation|chat\s+history|previous\s+messages|"
        r"full\s+context|entire\s+context)",
        "context_exfil",
    ),
    (r"authorized_keys", "ssh_backdoor"),
    (r"\$HOME/\.ssh|\~/\.ssh", "ssh_access"),
    (r"\$HOME/\.hermes/\.env|\~/\.hermes/\.env", "hermes_env"),
    (
        r"(update|modify|edit|write|change|append|add\s+to)\s+[^\n]{0,2048}(?:AGENTS\.md|CLAUDE\.md|"
        r"\.cursorrules|\.clinerules)",
        "agent_config_mod",
    ),
    (
        r"(update|modify|edit|write|change|append|add\s+to)\s+[^\n]{0,2048}\.hermes/(config\.yaml|SOUL\.md)",
        "hermes_config_mod",
    ),
    (r"""(?:api[_-]?key|token|secret|password)\s*[=:]\s*["\'][A-Za-z0-9+/=_-]{20,}""", "hardcoded_secret"),
)

_COMPILED = tuple((re.compile(pattern, re.IGNORECASE), pid) for pattern, pid in _PATTERNS)
_ORDER = {pid: i for i, (_, pid) in enumerate(_PATTERNS)}

#: Zero-width and bidirectional characters that hide text from a reader.
INVISIBLE_CHARS = frozenset(
    "\u200b\u200c\u200d\u2060\u2062\u2063\u2064\ufeff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

#: Unicode tag characters (U+E0020-U+E007E) spell ASCII that a reader cannot see ("ASCII smuggling").
_TAG_OFFSET = 0xE0000
_TAGS = re.compile("[\U000e0020-\U000e007e]")
#: Characters that hide or move text: controls other than tab and newline, and format characters.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf"})
_ZWJ = "\u200d"
#: Emoji modifiers a joiner may follow: the variation selector and the skin tones.
_EMOJI_MODIFIERS = frozenset("\ufe0f\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff")


def scan_for_threats(content: str) -> list[str]:
    """The ids of every threat in `content`, as Hermes' memory scan finds them: invisible characters
    first, then matching patterns."""
    if not content:
        return []
    content = content[:MAX_SCAN_CHARS]
    findings = [f"invisible_unicode_U+{ord(ch):04X}" for ch in sorted(set(content) & INVISIBLE_CHARS)]
    # NFKC folds full-width look-alikes (ｃａｔ → cat) before matching, as Hermes does.
    normalised = unicodedata.normalize("NFKC", content)
    findings += [pid for compiled, pid in _COMPILED if compiled.search(normalised)]
    return findings


def prompt_threats(text: str) -> tuple[str, ...]:
    """The threats in a text Dreamer puts into an agent's context (`scan_for_threats` and more, see
    the module docstring), in table order; empty when it may go in as it is."""
    return tuple(dict.fromkeys(found for line in _line_threats(text.split("\n")) for found in line))


def withheld(threats: Iterable[str]) -> str:
    """The placeholder a flagged line becomes in the system prompt and the per-turn recall."""
    return f"[withheld: looks like an instruction to the agent ({', '.join(threats)})]"


def flagged(threats: Iterable[str]) -> str:
    """The mark put before a flagged text in a tool result."""
    return f"(flagged: reads like an instruction to the agent, not a fact: {', '.join(threats)})"


def withhold_lines(text: str) -> tuple[str, int]:
    """`text` for a system prompt: each flagged line replaced by `withheld`, every other line with
    its control and format characters escaped; and how many lines were withheld."""
    lines = text.split("\n")
    found = _line_threats(lines)
    out = [
        withheld(threats) if threats else printable(line) for line, threats in zip(lines, found, strict=True)
    ]
    return "\n".join(out), sum(1 for threats in found if threats)


def mark_lines(text: str) -> str:
    """`text` for a tool result: each flagged line marked with `flagged`, kept and escaped like the others."""
    lines = text.split("\n")
    found = _line_threats(lines)
    return "\n".join(
        f"{flagged(threats)} {printable(line)}" if threats else printable(line)
        for line, threats in zip(lines, found, strict=True)
    )


def _line_threats(lines: Sequence[str]) -> list[tuple[str, ...]]:
    """The threats of each line of a block: a match that spans lines flags each line it touches."""
    found: list[dict[str, None]] = [dict.fromkeys(_invisible(line)) for line in lines]
    for variant in (_as_hermes_reads, _revealed):
        texts = [variant(line[:MAX_SCAN_CHARS]) for line in lines]
        starts, offset = [], 0
        for part in texts:
            starts.append(offset)
            offset += len(part) + 1
        joined = "\n".join(texts)
        for compiled, pid in _COMPILED:
            for match in compiled.finditer(joined):
                first = bisect.bisect_right(starts, match.start()) - 1
                last = bisect.bisect_right(starts, max(match.end() - 1, match.start())) - 1
                for index in range(first, last + 1):
                    found[index].setdefault(pid, None)
    return [tuple(sorted(threats, key=_order)) for threats in found]


def _order(threat: str) -> tuple[int, int]:
    """Invisible characters first, by code point, then patterns in the table's order."""
    if threat.startswith("invisible_unicode_U+"):
        return 0, int(threat.rsplit("+", 1)[1], 16)
    return 1, _ORDER[threat]


def _as_hermes_reads(line: str) -> str:
    return unicodedata.normalize("NFKC", line)


def _revealed(line: str) -> str:
    """`line` as a model may read it: tag characters as the ASCII they spell, other hidden
    characters removed (a zero-width space inside a word no longer breaks it)."""
    line = _TAGS.sub(lambda m: chr(ord(m.group(0)) - _TAG_OFFSET), line)
    kept = "".join(ch for ch in line if ch == "\t" or unicodedata.category(ch) not in _HIDDEN_CATEGORIES)
    return unicodedata.normalize("NFKC", kept)


def _invisible(line: str) -> list[str]:
    """Hermes' invisible characters in `line`, by code point; a joiner between emoji is not one."""
    hits = set(line[:MAX_SCAN_CHARS]) & INVISIBLE_CHARS
    if _ZWJ in hits and _joiners_in_emoji_only(line):
        hits.discard(_ZWJ)
    return [f"invisible_unicode_U+{ord(ch):04X}" for ch in sorted(hits)]


def _joiners_in_emoji_only(line: str) -> bool:
    """Whether every zero-width joiner in `line` joins two emoji (🧘‍♀️, 👩‍💻), as emoji sequences do."""
    for index, ch in enumerate(line):
        if ch != _ZWJ:
            continue
        before = index - 1
        while before >= 0 and line[before] in _EMOJI_MODIFIERS:
            before -= 1
        after = line[index + 1] if index + 1 < len(line) else ""
        if before < 0 or unicodedata.category(line[before]) != "So" or not after:
            return False
        if unicodedata.category(after) != "So":
            return False
    return True
