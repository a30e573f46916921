"""Hermes' threat scan of memory entries: the patterns and messages of its "strict" scope.

Hermes refuses to *write* an entry that matches (`first_threat_message`, the reason it returns) and,
when it builds the system-prompt snapshot, replaces a matching entry *already on disk* with a
`[BLOCKED: ...]` placeholder (`snapshot_entries`). Both are reproduced here so that `dreamer memory`
refuses what Hermes refuses and renders what Hermes renders.

The pattern table is Hermes' own (hermes-agent 0.19.0, `tools/threat_patterns.py`, MIT licence),
restricted to the patterns its "strict" scope applies; keep it in step when Hermes changes it. One
deliberate difference: Hermes lists several invisible characters found in one entry in set order,
which varies between processes; they are listed here by code point, so Dreamer's output is stable.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = [
    "INVISIBLE_CHARS",
    "MAX_SCAN_CHARS",
    "first_threat_message",
    "scan_for_threats",
    "snapshot_entries",
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

#: Zero-width and bidirectional characters that hide text from a reader.
INVISIBLE_CHARS = frozenset(
    "\u200b\u200c\u200d\u2060\u2062\u2063\u2064\ufeff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

_BLOCKED_PREFIX = "[BLOCKED:"


def scan_for_threats(content: str) -> list[str]:
    """The ids of every threat in `content`: invisible characters first, then matching patterns."""
    if not content:
        return []
    content = content[:MAX_SCAN_CHARS]
    findings = [f"invisible_unicode_U+{ord(ch):04X}" for ch in sorted(set(content) & INVISIBLE_CHARS)]
    # NFKC folds full-width look-alikes (ｃａｔ → cat) before matching, as Hermes does.
    normalised = unicodedata.normalize("NFKC", content)
    findings += [pid for compiled, pid in _COMPILED if compiled.search(normalised)]
    return findings


def first_threat_message(content: str) -> str | None:
    """Hermes' reason for refusing to write `content`, or None when it would store it."""
    findings = scan_for_threats(content)
    if not findings:
        return None
    first = findings[0]
    if first.startswith("invisible_unicode_"):
        codepoint = first.removeprefix("invisible_unicode_")
        return f"Blocked: content contains invisible unicode character {codepoint} (possible injection)."
    return (
        f"Blocked: content matches threat pattern '{first}'. Content is injected into the system "
        f"prompt and must not contain injection or exfiltration payloads."
    )


def snapshot_entries(entries: Sequence[str], filename: str) -> list[str]:
    """`entries` as Hermes puts them in the snapshot: each matching entry replaced by a placeholder."""
    shown: list[str] = []
    for entry in entries:
        findings = [] if not entry or entry.startswith(_BLOCKED_PREFIX) else scan_for_threats(entry)
        if findings:
            shown.append(
                f"{_BLOCKED_PREFIX} {filename} entry contained threat pattern(s): {', '.join(findings)}. "
                f"Removed from system prompt; use memory(action=remove) to delete the original.]"
            )
        else:
            shown.append(entry)
    return shown
