"""The skill file operating rules are moved to, in the agent's skills directory.

Hermes loads skills from `<skills dir>/<name>/SKILL.md` (YAML front matter with `name` and
`description`, then Markdown). Rules are kept in one skill, `memory-operating-rules`, one list item
per rule, so they leave the character-budgeted memory files but stay available to the agent.
The file is changed under its sidecar lock by an atomic replace, and a rule already listed is not
listed twice. A symbolic link in place of the skill's directory, file or lock is refused.
"""

from __future__ import annotations

from pathlib import Path

from dreamer.errors import AuditError
from dreamer.hermes.audit.settings import RULES_SKILL_NAME
from dreamer.hermes.memory.locking import atomic_write_text, exclusive_lock, refuse_symlink

__all__ = ["SkillWriteError", "append_rule", "format_rule", "skill_header"]


class SkillWriteError(AuditError, OSError):
    """The skill file could not be written; check that the skills directory exists and is writable.
    Catch it around a move to the skill: the entry then stays where it is."""


def skill_header() -> str:
    """The text a new rules skill starts with."""
    return (
        "---\n"
        f"name: {RULES_SKILL_NAME}\n"
        'description: "Operating rules the memory audit moved out of MEMORY.md and USER.md."\n'
        "---\n"
        "\n"
        "# Memory operating rules\n"
        "\n"
        "Follow these rules. They were moved here from the memory files so they no longer use the\n"
        "memory budget.\n"
        "\n"
    )


def format_rule(rule: str) -> str:
    """`rule` as a Markdown list item; continuation lines are indented under it."""
    lines = rule.strip().splitlines()
    return "\n".join([f"- {lines[0]}", *(f"  {line}" if line.strip() else "" for line in lines[1:])]) + "\n"


def append_rule(skill_path: Path, rule: str) -> bool:
    """Add `rule` to the skill at `skill_path`; False if it was already listed there."""
    item = format_rule(rule)
    skills_dir = skill_path.parent.parent
    if not skills_dir.is_dir():
        raise SkillWriteError(f"skills directory {skills_dir} does not exist; create it or fix the path")
    try:
        refuse_symlink(skill_path.parent)
        skill_path.parent.mkdir(exist_ok=True)
        with exclusive_lock(skill_path):
            try:
                current = skill_path.read_text(encoding="utf-8")
            except FileNotFoundError:
                current = skill_header()
            if "\n" + item in "\n" + current:
                return False
            if not current.endswith("\n"):
                current += "\n"
            atomic_write_text(skill_path, current + item, refuse_link=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillWriteError(f"cannot write the rules skill {skill_path}: {exc}") from exc
    return True
