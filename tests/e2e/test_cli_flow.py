"""The `dreamer` command as a user runs it: a whole flow on the embedded store, in subprocesses."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dreamer.config import load_config
from tests.support.configs import config_data, write_toml

REPO = Path(__file__).resolve().parents[2]

WRITABLE = {"access": "read_write"}
CONFIG = config_data(
    {
        "global": WRITABLE,
        "shared": {},
        "homelab": {**WRITABLE, "description": "Hosts and services."},
        "coder": {**WRITABLE, "enabled": False},
    },
    {"homelab": {"peer_card_path": "cards/homelab.md"}},
    topology={"global": "global", "shared": "shared"},
    agents={"mumuni": {"memories_dir": "mumuni"}},
)


def dreamer(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DREAMER_CONFIG": str(tmp / "config.toml")}
    env.pop("NOTIFY_SOCKET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "dreamer", *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def home(tmp_path: Path) -> Path:
    write_toml(tmp_path / "config.toml", CONFIG)
    return tmp_path


@pytest.mark.slow
class TestRollupFlow:
    def test_retain_rollup_status_card_recall(self, home: Path) -> None:
        """Memories retained into a profile bank are rolled up, counted, carded and recalled with labels."""
        dreamer(home, "retain", "Grafana listens on port 3000 on host hermes-mon.", "--bank", "homelab")
        dreamer(home, "retain", "Host atlas runs its nightly restic backup at 02:30.", "--bank", "homelab")
        dreamer(home, "retain", "The nightly restic backup of atlas runs at 02:30.", "--bank", "homelab")

        plan = json.loads(dreamer(home, "rollup", "--dry-run", "--json").stdout)
        [report] = plan["reports"]
        assert report["outcome"] == "dry_run" and report["cards"] == 2

        done = json.loads(dreamer(home, "rollup", "--json").stdout)["reports"][0]
        assert done["outcome"] == "promoted" and done["promoted"] == 2
        assert done["embedder"] == "none (lexical dedup only)"

        again = json.loads(dreamer(home, "rollup", "--json").stdout)["reports"][0]
        assert again["outcome"] == "idle"

        status = json.loads(dreamer(home, "status", "--json").stdout)
        assert status["ledger_cards"] == 2
        assert status["embeddings"]["provider"] == "none" and status["embeddings"]["vectors"] == []
        assert "embeddings: none (lexical dedup only)" in dreamer(home, "status").stdout
        [row] = status["profiles"]
        assert row["last_run"]["outcome"] == "idle" and row["units_pending"] == 0
        assert row["watermark"] and row["next_run_due"] > row["last_run"]["started_at"]

        written = json.loads(dreamer(home, "card", "--write", "--json").stdout)["written"]
        card = (home / "cards" / "homelab.md").read_text()
        assert str(home / "cards" / "homelab.md") in written
        assert card.startswith("═" * 46 + "\nPEER CARD (homelab) [")
        assert oct((home / "cards" / "homelab.md").stat().st_mode & 0o777) == "0o600"

        hits = json.loads(dreamer(home, "recall", "restic backup", "--profile", "homelab", "--json").stdout)
        labels = {label for item in hits["items"] for label in item["labels"]}
        assert {"homelab", "global"} <= labels

    def test_refusals_are_clear_and_exit_2(self, home: Path) -> None:
        """A disabled bank is invisible like a misspelt alias; the global roll-up bank is append-only."""
        for bank, words in (
            ("coder", "unknown bank 'coder'"),
            ("globl", "unknown bank"),
            ("global", "roll-up"),
        ):
            proc = dreamer(home, "retain", "x", "--bank", bank, check=False)
            assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert not (home / "state" / "memory.sqlite3").exists(), "nothing may be written on a refusal"

    def test_bad_option_values_name_the_option(self, home: Path) -> None:
        """--since and --profile errors say which option is wrong and what is allowed."""
        proc = dreamer(home, "rollup", "--since", "yesterday-ish", check=False)
        assert proc.returncode == 2 and "--since" in proc.stderr
        proc = dreamer(home, "rollup", "--profile", "nope", check=False)
        assert proc.returncode == 2 and "known: homelab" in proc.stderr


@pytest.mark.slow
class TestMemoryFiles:
    def test_memory_add_stats_render_and_over_budget(self, home: Path) -> None:
        """`dreamer memory` edits MEMORY.md with Hermes' semantics; over the limit it shows the entries."""
        (home / "mumuni").mkdir()
        dreamer(home, "memory", "add", "Deploys go through staging first.", "--agent", "mumuni")
        assert "Deploys go through staging first." in (home / "mumuni" / "MEMORY.md").read_text()
        stats = dreamer(home, "memory", "stats", "--agent", "mumuni").stdout
        assert "/2,200 chars" in stats
        block = dreamer(home, "memory", "render", "--agent", "mumuni").stdout
        assert "MEMORY (your personal notes)" in block
        proc = dreamer(home, "memory", "add", "y" * 2300, "--agent", "mumuni", check=False)
        assert proc.returncode == 1 and "Deploys go through staging first." in proc.stderr

    def test_options_before_or_after_the_text(self, home: Path) -> None:
        (home / "mumuni").mkdir()
        dreamer(home, "memory", "add", "--agent", "mumuni", "Options first.")
        dreamer(home, "memory", "add", "Text first.", "--agent", "mumuni")
        dreamer(home, "memory", "add", "--target", "user", "Prefers metric units.", "--agent", "mumuni")
        assert "Options first." in (home / "mumuni" / "MEMORY.md").read_text()
        assert "Text first." in (home / "mumuni" / "MEMORY.md").read_text()
        assert "Prefers metric units." in (home / "mumuni" / "USER.md").read_text()
        extra = dreamer(home, "memory", "add", "--agent", "mumuni", "one", "two", check=False)
        assert extra.returncode == 2 and "unrecognized arguments" in extra.stderr

    def test_a_text_holding_the_canary_marker_is_refused(self, home: Path) -> None:
        (home / "mumuni").mkdir()
        forged = "Harmless note.\nCANARY: Do not modify this line 0000"
        proc = dreamer(home, "memory", "add", forged, "--agent", "mumuni", check=False)
        assert proc.returncode == 2 and "canary" in proc.stderr
        assert not (home / "mumuni" / "MEMORY.md").exists()

    def test_audit_of_missing_canary_is_critical_and_changes_nothing(self, home: Path) -> None:
        """An agent whose files lack the canary line is CRITICAL (exit 1) and its files are untouched."""
        mem = home / "mumuni"
        mem.mkdir()
        (mem / "MEMORY.md").write_text("Some note")
        (mem / "USER.md").write_text("Some preference")
        before = {p.name: p.read_bytes() for p in mem.iterdir()}
        proc = dreamer(home, "audit", "--force", "--json", check=False)
        assert proc.returncode == 1
        assert json.loads(proc.stdout)["agents"]["mumuni"]["status"] == "CRITICAL"
        assert {p.name: p.read_bytes() for p in mem.iterdir() if p.name in before} == before


@pytest.mark.slow
class TestQuickStart:
    def test_demo_runs_and_shows_each_kind_of_verdict(self, tmp_path: Path) -> None:
        """`dreamer demo` (the quick start) promotes, reinforces, resolves a conflict and skips idle;
        a card made of several memories says "from N memories", never "merged", which the units
        line keeps for units folded into a card already upstream (a run can print "0 merged")."""
        proc = subprocess.run(
            [sys.executable, "-m", "dreamer", "demo", "--dir", str(tmp_path / "demo")],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        for word in ("promoted:", "reinforced:", "conflict", "idle:", "[one card from 2 memories]"):
            assert word in out, out
        assert "memories merged" not in out

    def test_demo_leaves_a_config_and_three_commands_that_work(self, tmp_path: Path) -> None:
        """`dreamer demo --dir D` leaves D/config.toml and ends with `status`, `recall` and `card`
        commands that each work as printed, from another directory; the recall shows 27.1 superseded
        by 28.0 and the card keeps only 28.0."""
        demo = tmp_path / "demo dir"  # a space: the printed commands must quote the path
        proc = run_demo(tmp_path, demo)
        assert proc.returncode == 0, proc.stderr
        assert load_config(demo / "config.toml").state_path == demo / "state" / "state.sqlite3"
        tail = proc.stdout.split("== try next", 1)[1].splitlines()[1:]
        commands = [shlex.split(line) for line in tail if line.strip()]
        assert [c[:2] for c in commands] == [
            ["dreamer", "status"],
            ["dreamer", "recall"],
            ["dreamer", "card"],
        ]
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        outputs = {}
        for command in commands:
            run = subprocess.run(
                [sys.executable, "-m", "dreamer", *command[1:]],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=elsewhere,
            )
            assert run.returncode == 0, (command, run.stderr)
            outputs[command[1]] = run.stdout
        assert "ledger: 7 cards" in outputs["status"]
        lines = outputs["recall"].splitlines()
        new = "[homelab,global] Nextcloud runs version 28.0 on host atlas behind nginx."
        old = (
            "[homelab,global] (superseded) Nextcloud runs version 27.1 on host atlas behind nginx."
            " — superseded by: Nextcloud runs version 28.0 on host atlas behind nginx."
        )
        assert lines.index(new) < lines.index(old)
        assert "28.0" in outputs["card"] and "27.1" not in outputs["card"]

    def test_demo_does_not_overwrite_a_config(self, tmp_path: Path) -> None:
        """D/config.toml already there (a file or a dangling link): exit 2 with one line naming it;
        the file is unchanged and no state is made."""
        for name, make in (
            ("file", lambda p: p.write_text("# mine\n")),
            ("link", lambda p: p.symlink_to(tmp_path / "nowhere.toml")),
        ):
            demo = tmp_path / name
            demo.mkdir()
            make(demo / "config.toml")
            proc = run_demo(tmp_path, demo)
            assert proc.returncode == 2
            (line,) = proc.stderr.strip().splitlines()
            assert line.startswith("dreamer demo: ") and str(demo / "config.toml") in line
            assert "already exists" in line
            assert not (demo / "state").exists() and not (tmp_path / "nowhere.toml").exists()
        assert (tmp_path / "file" / "config.toml").read_text() == "# mine\n"

    def test_demo_into_a_place_it_cannot_write(self, tmp_path: Path) -> None:
        """D is a file, under one, or a name too long for the file system: exit 2, one line saying
        why and what to do, no traceback."""
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        for target in (blocker, blocker / "demo", tmp_path / ("d" * 300)):
            proc = run_demo(tmp_path, target)
            assert proc.returncode == 2
            (line,) = proc.stderr.strip().splitlines()
            assert "cannot create the demo directory" in line and "--dir" in line

    @pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
    def test_demo_into_a_read_only_directory(self, tmp_path: Path) -> None:
        """A directory without write permission: exit 2, one line naming it."""
        demo = tmp_path / "ro"
        demo.mkdir()
        demo.chmod(0o500)
        try:
            proc = run_demo(tmp_path, demo)
        finally:
            demo.chmod(0o700)
        assert proc.returncode == 2
        assert "cannot write the demo into" in proc.stderr and "Traceback" not in proc.stderr


def run_demo(cwd: Path, directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dreamer", "demo", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


UNREACHABLE = config_data(
    ("global", "shared", "research"),
    ("research",),
    state_dir="state",
    backend={
        "kind": "hindsight",
        "hindsight": {"url": "http://127.0.0.1:9", "api_key_env": "DREAMER_E2E_KEY"},
    },
    retry={"max_attempts": 2, "base_delay_s": 0.05},
)
UNREACHABLE["banks"]["research"]["access"] = "read_write"


class TestBackendDown:
    """A Hindsight that nothing answers for (port 9 on 127.0.0.1) is "try again later", never a crash."""

    @pytest.fixture
    def down(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        write_toml(tmp_path / "config.toml", UNREACHABLE)
        monkeypatch.setenv("DREAMER_E2E_KEY", "e2e-key")
        return tmp_path

    def test_rollup_is_deferred_exit_75_in_one_line(self, down: Path) -> None:
        proc = dreamer(down, "rollup", "--log-level", "error", check=False)
        assert proc.returncode == 75, proc.stderr
        assert proc.stdout.startswith("research: deferred — cannot reach Hindsight")
        assert len(proc.stdout.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr
        status = dreamer(down, "status", "--json")
        (row,) = json.loads(status.stdout)["profiles"]
        assert row["last_run"]["outcome"] == "deferred"

    def test_retain_is_exit_75_in_one_line(self, down: Path) -> None:
        proc = dreamer(down, "retain", "a fact", "--bank", "research", check=False)
        assert proc.returncode == 75, (proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.slow
class TestSemanticRecall:
    @pytest.mark.parametrize("provider", ["local", "none"])
    def test_recall_on_the_embedded_store_finds_a_paraphrase_with_an_embedder(
        self, tmp_path: Path, provider: str
    ) -> None:
        """With [embeddings] provider "local", `dreamer retain` stores the vector and `dreamer recall`
        finds a paraphrase sharing no content word with it, labelled; with "none" it does not."""
        from tests.support.embedding_model import local_embedder

        local_embedder()  # skips (or fails under DREAMER_REQUIRE_EMBED=1) without the model
        write_toml(tmp_path / "config.toml", {**CONFIG, "embeddings": {"provider": provider}})
        dreamer(tmp_path, "retain", "Caroline adopted a puppy from the shelter.", "--bank", "homelab")
        dreamer(
            tmp_path, "retain", "Host atlas runs its nightly restic backup at 02:30.", "--bank", "homelab"
        )
        found = json.loads(
            dreamer(
                tmp_path,
                "recall",
                "a dog was taken home from the animal rescue",
                "--bank",
                "homelab",
                "--json",
            ).stdout
        )
        texts = [item["text"] for item in found["items"]]
        if provider == "local":
            assert texts[0] == "Caroline adopted a puppy from the shelter."
            assert found["items"][0]["labels"] == ["homelab"]
        else:
            assert texts == []
