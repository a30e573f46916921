"""`dreamer audit --init --agent A` on real agent folders, through the command line: the canary
lines and the registry entry a fresh agent lacks, nothing else, nothing twice, nothing on a dry run
or a refusal; and the audit of an agent not set up yet naming the command."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from dreamer.hermes.audit.canary import CANARY_MARKER, canary_lines
from dreamer.hermes.audit.writers import registered_writers

FACTS = "The NAS is nas01.lan at 192.168.1.20.\n§\nDeploys go through the staging host first."
USER = "User's name is Ada.\n"
CANARY_LINE = re.compile(re.escape(CANARY_MARKER) + r" \(token [0-9a-f]{12}\)")

Snapshot = dict[str, tuple[bytes, int] | str]


@pytest.fixture
def memories(tmp_path: Path) -> Path:
    """A fresh agent `a`: MEMORY.md and USER.md with entries, no canary, no registry, no ledger."""
    from tests.support.configs import config_data, write_toml

    folder = tmp_path / "home" / "memories"
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text(FACTS, encoding="utf-8")
    (folder / "USER.md").write_text(USER, encoding="utf-8")
    write_toml(tmp_path / "config.toml", config_data(agents={"a": {"memories_dir": str(folder)}}))
    return folder


def dreamer(memories: Path, *args: str) -> tuple[int, str, str]:
    """The `dreamer ARGS` command, run as a user runs it, with the fixture's config: the exit
    status, stdout and stderr."""
    from tests.support.cli import run_dreamer

    done = run_dreamer(memories.parent.parent / "config.toml", *args)
    return done.returncode, done.stdout, done.stderr


def snapshot(*folders: Path) -> Snapshot:
    """Every entry of `folders`: a file's bytes and mtime, a link's target."""
    found: Snapshot = {}
    for folder in folders:
        for path in sorted(folder.iterdir()):
            if path.is_symlink():
                found[str(path)] = f"-> {os.readlink(path)}"
            else:
                found[str(path)] = (path.read_bytes(), path.stat().st_mtime_ns)
    return found


def audit_json(memories: Path) -> dict[str, object]:
    code, out, _ = dreamer(memories, "audit", "--agent", "a", "--force", "--json")
    report: dict[str, object] = json.loads(out)["agents"]["a"]
    assert code == (1 if report["status"] in ("CRITICAL", "ERROR") else 0)
    return report


class TestSetsUp:
    def test_fresh_agent_is_audited_for_real_after_init(self, memories: Path) -> None:
        """A fresh agent is CRITICAL; after --init each file ends with one canary line in the
        rotation's format (one token for both), the registry lists dreamer, and the next audit is
        neither CRITICAL nor a dry run: it applies (COMPLETE) as a registered writer."""
        assert audit_json(memories)["status"] == "CRITICAL"

        code, out, err = dreamer(memories, "audit", "--init", "--agent", "a")
        assert code == 0, err
        memory = (memories / "MEMORY.md").read_text(encoding="utf-8")
        user = (memories / "USER.md").read_text(encoding="utf-8")
        (memory_canary,) = canary_lines(memory)
        assert CANARY_LINE.fullmatch(memory_canary)
        assert memory == f"{FACTS}\n§\n{memory_canary}"
        assert user == f"{USER.rstrip()}\n§\n{memory_canary}"  # the same line, token and all
        assert (memories / "MEMORY_WRITERS.md").read_text(encoding="utf-8") == "- dreamer\n"
        assert f"{memories / 'MEMORY.md'}: added the line '{memory_canary}'" in out
        assert f"{memories / 'MEMORY_WRITERS.md'}: added the line '- dreamer'" in out
        assert "a: set up for the audit" in out

        report = audit_json(memories)
        assert report["status"] == "COMPLETE", report["reason"]
        assert report["dry_run"] is False and report["writer_registered"] is True
        assert report["canaries"] == {"MEMORY.md": True, "USER.md": True}

    def test_second_init_changes_nothing_and_says_so(self, memories: Path) -> None:
        """Run twice, --init changes nothing the second time (every file's bytes and mtime, no file
        added) and says each file is unchanged and the agent already set up."""
        assert dreamer(memories, "audit", "--init", "--agent", "a")[0] == 0
        before = snapshot(memories)

        code, out, err = dreamer(memories, "audit", "--init", "--agent", "a")
        assert code == 0, err
        assert snapshot(memories) == before
        assert f"{memories / 'MEMORY.md'}: has a canary line; unchanged" in out
        assert f"{memories / 'USER.md'}: has a canary line; unchanged" in out
        assert f"{memories / 'MEMORY_WRITERS.md'}: dreamer is registered; unchanged" in out
        assert "a: already set up for the audit; nothing changed" in out

    def test_json_lists_each_file_and_its_line(self, memories: Path) -> None:
        """--json gives, per agent, whether anything changed and each file with the line added (or
        why it is unchanged), for scripts."""
        code, out, err = dreamer(memories, "audit", "--init", "--agent", "a", "--json")
        assert code == 0, err
        doc = json.loads(out)["agents"]["a"]
        assert doc["changed"] is True and doc["dry_run"] is False
        files = {Path(f["file"]).name: f for f in doc["files"]}
        assert CANARY_LINE.fullmatch(files["MEMORY.md"]["line"])
        assert files["MEMORY_WRITERS.md"]["line"] == "- dreamer"

        again = json.loads(dreamer(memories, "audit", "--init", "--agent", "a", "--json")[1])
        assert again["agents"]["a"]["changed"] is False
        assert {f["unchanged"] for f in again["agents"]["a"]["files"]} == {
            "has a canary line",
            "dreamer is registered",
        }

    def test_existing_registry_keeps_its_writers(self, memories: Path) -> None:
        """A registry listing other writers keeps every line as it was, with '- dreamer' added
        after them; every line of MEMORY.md and USER.md is kept too, in order."""
        registry = "# Who writes this agent's memory\n\n- hermes: the agent itself\n| backup-bot | nightly |"
        (memories / "MEMORY_WRITERS.md").write_text(registry, encoding="utf-8")

        assert dreamer(memories, "audit", "--init", "--agent", "a")[0] == 0
        text = (memories / "MEMORY_WRITERS.md").read_text(encoding="utf-8")
        assert text == registry + "\n- dreamer\n"
        assert {"hermes", "backup-bot", "dreamer"} <= registered_writers(text)
        for name, original in (("MEMORY.md", FACTS), ("USER.md", USER)):
            lines = (memories / name).read_text(encoding="utf-8").split("\n")
            assert lines[: len(original.rstrip().split("\n"))] == original.rstrip().split("\n")

    def test_an_agent_set_up_by_hand_gets_only_what_it_lacks(self, memories: Path) -> None:
        """Canary lines placed by hand stay byte for byte (no second canary); only the missing
        registry entry is added."""
        (memories / "MEMORY.md").write_text(f"{CANARY_MARKER} mem-1\n§\n{FACTS}", encoding="utf-8")
        (memories / "USER.md").write_text(f"{USER}§\n{CANARY_MARKER}", encoding="utf-8")
        memory, user = (memories / "MEMORY.md").read_bytes(), (memories / "USER.md").read_bytes()

        code, out, _ = dreamer(memories, "audit", "--init", "--agent", "a")
        assert code == 0
        assert (memories / "MEMORY.md").read_bytes() == memory and (memories / "USER.md").read_bytes() == user
        assert (memories / "MEMORY_WRITERS.md").read_text(encoding="utf-8") == "- dreamer\n"
        assert out.count("has a canary line; unchanged") == 2


class TestDryRun:
    def test_dry_run_writes_nothing(self, memories: Path) -> None:
        """--init --dry-run prints each line it would add and writes nothing: every file's bytes and
        mtime are as before, and no file (not even a lock file) is created."""
        before = snapshot(memories)
        code, out, err = dreamer(memories, "audit", "--init", "--agent", "a", "--dry-run")
        assert code == 0, err
        assert snapshot(memories) == before
        assert f"{memories / 'MEMORY.md'}: would add the line '{CANARY_MARKER} (token " in out
        assert f"{memories / 'USER.md'}: would add the line '{CANARY_MARKER} (token " in out
        assert f"{memories / 'MEMORY_WRITERS.md'}: would add the line '- dreamer'" in out
        assert "a: dry run; nothing was written" in out

        doc = json.loads(dreamer(memories, "audit", "--init", "--agent", "a", "--dry-run", "--json")[1])
        assert doc["agents"]["a"]["dry_run"] is True and doc["agents"]["a"]["would_change"] is True
        assert snapshot(memories) == before


class TestRefuses:
    def refused(self, memories: Path, *watched: Path) -> str:
        """Run --init expecting a refusal: exit 1, one line on stderr, nothing changed in the memories
        folder or `watched`; the line."""
        before = snapshot(memories, *watched)
        code, out, err = dreamer(memories, "audit", "--init", "--agent", "a")
        assert code == 1
        assert snapshot(memories, *watched) == before
        assert out == "" and "Traceback" not in err
        (line,) = err.strip().splitlines()
        assert line.startswith("a: not set up for the audit: ")
        return line

    def test_symlinked_memory_md_is_refused(self, memories: Path) -> None:
        """A MEMORY.md that is a symbolic link (to a file elsewhere under tmp_path) is refused,
        naming the link and the line to add by hand; neither the link, its target nor any other
        file changes."""
        elsewhere = memories.parent.parent / "dotfiles"
        elsewhere.mkdir()
        target = elsewhere / "MEMORY.md"
        target.write_text(FACTS, encoding="utf-8")
        (memories / "MEMORY.md").unlink()
        (memories / "MEMORY.md").symlink_to(target)

        line = self.refused(memories, elsewhere)
        assert f"{memories / 'MEMORY.md'} is a symbolic link to {target}" in line
        assert "add the line 'CANARY: Do not modify this line (token " in line and "by hand" in line

    def test_unreadable_user_md_is_refused(self, memories: Path) -> None:
        """A USER.md that is not UTF-8 text is refused naming the file and the fix; MEMORY.md, which
        could be set up, is not touched either."""
        (memories / "USER.md").write_bytes(b"User's name is \xff\xfe.")
        line = self.refused(memories)
        assert f"cannot read {memories / 'USER.md'}" in line and "UTF-8" in line

    def test_unreadable_registry_is_refused(self, memories: Path) -> None:
        """A MEMORY_WRITERS.md that is not UTF-8 text is refused naming it; nothing is written."""
        (memories / "MEMORY_WRITERS.md").write_bytes(b"- hermes\n- \xffdreamer\n")
        line = self.refused(memories)
        assert f"cannot read the writer registry {memories / 'MEMORY_WRITERS.md'}" in line

    def test_registry_that_strikes_dreamer_out_is_refused(self, memories: Path) -> None:
        """A registry that names dreamer without registering it ('- ~~dreamer~~') cannot be read as
        yes or no: refused, naming the file, the line and what to make of it."""
        (memories / "MEMORY_WRITERS.md").write_text("- hermes\n- ~~dreamer~~ (paused)\n", encoding="utf-8")
        line = self.refused(memories)
        assert f"{memories / 'MEMORY_WRITERS.md'} line 2 names dreamer without registering it" in line
        assert "make that line read '- dreamer' or delete it" in line

    def test_canary_lost_after_the_ledger_recorded_it_is_refused(self, memories: Path) -> None:
        """Once an audit recorded the canaries, a canary line gone since is a breach: --init refuses
        to put a new one in its place (that would launder it), and the audit stays CRITICAL."""
        assert dreamer(memories, "audit", "--init", "--agent", "a")[0] == 0
        assert audit_json(memories)["status"] == "COMPLETE"
        (memories / "USER.md").write_text(USER, encoding="utf-8")  # rewritten wholesale

        line = self.refused(memories)
        assert f"{memories / 'USER.md'} has no canary line of its own" in line and "ledger" in line
        report = audit_json(memories)
        assert report["status"] == "CRITICAL" and "--init" not in str(report["reason"])

    def test_file_that_would_go_over_its_limit_is_refused(self, memories: Path) -> None:
        """A canary line that would put MEMORY.md over the limit of the agent's config.yaml is
        refused, with the size and the fix."""
        (memories.parent / "config.yaml").write_text("memory:\n  memory_char_limit: 100\n", encoding="utf-8")
        line = self.refused(memories)
        assert (
            f"{memories / 'MEMORY.md'} at " in line and "/100 chars" in line and "remove or shorten" in line
        )


class TestUsage:
    def test_init_needs_an_agent_and_stands_alone(self, memories: Path) -> None:
        """--init without --agent, or with --force / --rotate-canary, is bad usage (exit 2) and
        writes nothing."""
        before = snapshot(memories)
        for args in (
            ("--init",),
            ("--init", "--agent", "a", "--force"),
            ("--init", "--agent", "a", "--rotate-canary"),
        ):
            code, _, err = dreamer(memories, "audit", *args)
            assert code == 2 and "--init" in err
        assert snapshot(memories) == before


class TestAuditNamesInit:
    def test_first_audit_says_to_run_init(self, memories: Path) -> None:
        """The first audit of an agent without canaries is CRITICAL and its reason names
        `dreamer audit --init --agent a`."""
        report = audit_json(memories)
        assert report["status"] == "CRITICAL"
        assert "run `dreamer audit --init --agent a`" in str(report["reason"])

    def test_audit_of_an_unregistered_agent_says_to_run_init(self, memories: Path) -> None:
        """With canaries placed but no registry, the audit is a dry run whose reason says the registry
        is missing and names `dreamer audit --init --agent a`."""
        (memories / "MEMORY.md").write_text(f"{FACTS}\n§\n{CANARY_MARKER}", encoding="utf-8")
        (memories / "USER.md").write_text(f"{USER}§\n{CANARY_MARKER}", encoding="utf-8")
        report = audit_json(memories)
        assert report["status"] == "DRY_RUN"
        assert "MEMORY_WRITERS.md does not exist" in str(report["reason"])
        assert "`dreamer audit --init --agent a`" in str(report["reason"])
