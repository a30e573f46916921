"""Logging: journal detection, one JSON line per record with its priority, and no secret ever."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
import structlog

from dreamer.log import (
    REDACTED,
    SecretRedactor,
    configure_logging,
    get_logger,
    is_journal_stream,
    resolve_format,
)

SECRET = "hs-live-7f3a9c2e1b"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def journal_env(stream: TextIO) -> dict[str, str]:
    st = os.fstat(stream.fileno())
    return {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


class TestJournalDetection:
    def test_matching_dev_and_inode_is_the_journal(self, tmp_path: Path) -> None:
        """JOURNAL_STREAM equal to the stream's dev:ino means stdout is the journal."""
        with (tmp_path / "out").open("w") as stream:
            assert is_journal_stream(stream, journal_env(stream))

    def test_another_file_is_not_the_journal(self, tmp_path: Path) -> None:
        """A JOURNAL_STREAM naming a different file (output redirected by hand) is ignored."""
        with (tmp_path / "a").open("w") as a, (tmp_path / "b").open("w") as b:
            assert not is_journal_stream(b, journal_env(a))

    @pytest.mark.parametrize("value", ["", "garbage", "1:x", ":"])
    def test_missing_or_malformed_variable(self, tmp_path: Path, value: str) -> None:
        """No or a malformed JOURNAL_STREAM is never the journal."""
        with (tmp_path / "out").open("w") as stream:
            assert not is_journal_stream(stream, {"JOURNAL_STREAM": value})

    def test_stream_without_a_file_descriptor(self) -> None:
        """An in-memory stream (no fileno) is not the journal."""
        assert not is_journal_stream(io.StringIO(), {"JOURNAL_STREAM": "1:2"})


class TestResolveFormat:
    def test_auto_is_json_with_prefix_under_the_journal(self, tmp_path: Path) -> None:
        """auto + journal -> JSON lines with the priority prefix."""
        with (tmp_path / "out").open("w") as stream:
            assert resolve_format("auto", stream, journal_env(stream)) == ("json", True)

    def test_auto_is_console_on_a_terminal(self) -> None:
        """auto + a TTY -> the readable console format."""
        master, slave = os.openpty()
        try:
            with os.fdopen(slave, "w", closefd=False) as tty:
                assert resolve_format("auto", tty, {}) == ("console", False)
        finally:
            os.close(master)
            os.close(slave)

    def test_auto_is_plain_json_in_a_pipe_or_file(self, tmp_path: Path) -> None:
        """auto + neither -> JSON without a prefix (for jq)."""
        with (tmp_path / "out").open("w") as stream:
            assert resolve_format("auto", stream, {}) == ("json", False)

    def test_forced_formats_win(self, tmp_path: Path) -> None:
        """--log-format json|console is honoured whatever stdout is."""
        with (tmp_path / "out").open("w") as stream:
            env = journal_env(stream)
            assert resolve_format("console", stream, env) == ("console", True)
            assert resolve_format("json", stream, {}) == ("json", False)


class TestJournalOutput:
    def test_each_record_is_one_prefixed_json_line(self, tmp_path: Path) -> None:
        """Under the journal each record is `<N>{json}` on one line, N from its level, tracebacks included."""
        path = tmp_path / "out"
        with path.open("w") as stream:
            configure_logging(level="debug", stream=stream, environ=journal_env(stream))
            log = get_logger("dreamer.test")
            log.debug("d")
            log.info("i")
            log.warning("w")
            log.error("e")
            try:
                raise RuntimeError("first line\nsecond line")
            except RuntimeError:
                log.exception("boom")
            logging.getLogger("apscheduler.scheduler").warning("from stdlib %s", "logging")
        lines = path.read_text().splitlines()
        assert [line[:3] for line in lines] == ["<7>", "<6>", "<4>", "<3>", "<3>", "<4>"]
        records = [json.loads(line[3:]) for line in lines]
        assert [r["event"] for r in records] == ["d", "i", "w", "e", "boom", "from stdlib logging"]
        assert records[4]["exception"][0]["exc_value"] == "first line\nsecond line"
        assert records[5]["logger"] == "apscheduler.scheduler"

    def test_level_filter(self) -> None:
        """Records below the configured level are not written."""
        out = io.StringIO()
        configure_logging(log_format="json", level="warning", stream=out, environ={})
        log = get_logger("dreamer.test")
        log.info("hidden")
        log.warning("shown")
        assert [r["event"] for r in json_lines(out.getvalue())] == ["shown"]

    def test_context_variables_are_in_every_record(self) -> None:
        """Bound contextvars (profile, bank, run_id) appear in each record and go away after the block."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out, environ={})
        log = get_logger("dreamer.test")
        with structlog.contextvars.bound_contextvars(profile="research", bank="b", run_id="r1"):
            log.info("inside")
        log.info("outside")
        inside, outside = json_lines(out.getvalue())
        assert (inside["profile"], inside["bank"], inside["run_id"]) == ("research", "b", "r1")
        assert "profile" not in outside

    def test_reconfiguring_replaces_the_handler(self) -> None:
        """Calling configure_logging again (a reload) does not duplicate output."""
        first, second = io.StringIO(), io.StringIO()
        configure_logging(log_format="json", stream=first, environ={})
        configure_logging(log_format="json", stream=second, environ={})
        get_logger("dreamer.test").info("once")
        assert first.getvalue() == ""
        assert len(second.getvalue().splitlines()) == 1


class TestRedaction:
    @pytest.mark.parametrize(
        "key",
        ["api_key", "API_KEY", "apikey", "token", "access_token", "secret", "password", "Authorization"],
    )
    def test_sensitive_keys_are_masked(self, key: str) -> None:
        """Values under keys named like secrets are masked, whatever the value."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out, environ={})
        get_logger("dreamer.test").info("request", **{key: "abc123xyz"})
        (record,) = json_lines(out.getvalue())
        assert record[key] == REDACTED

    @pytest.mark.parametrize("key", ["llm_tokens", "llm_prompt_tokens", "tokens_today", "max_tokens_per_run"])
    def test_token_counts_are_not_masked(self, key: str) -> None:
        """A count of LLM tokens is not a secret: the job-finished record and the run's fields keep
        their numbers (a key matched on "token" had masked them)."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out, environ={})
        get_logger("dreamer.test").info("job finished", **{key: 1234})
        (record,) = json_lines(out.getvalue())
        assert record[key] == 1234

    def test_nested_sensitive_keys_are_masked(self) -> None:
        """Secrets inside nested mappings and lists are masked too; None stays None."""
        redactor = SecretRedactor()
        event = {"event": "x", "headers": {"Authorization": "Bearer abc", "Accept": "json"}, "token": None}
        result = redactor(None, "info", event)
        assert result["headers"] == {"Authorization": REDACTED, "Accept": "json"}
        assert result["token"] is None

    def test_configured_secret_is_masked_anywhere(self) -> None:
        """The configured API key is masked in any value, inside longer text and in exception messages."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out, secrets=[SECRET], environ={})
        log = get_logger("dreamer.test")
        log.info("sent", url=f"http://127.0.0.1/?k={SECRET}", items=[SECRET], raw=SECRET)
        try:
            raise ValueError(f"server rejected key {SECRET}")
        except ValueError:
            log.exception("failed")
        text = out.getvalue()
        assert SECRET not in text
        sent, failed = json_lines(text)
        assert sent["raw"] == REDACTED
        assert sent["url"] == f"http://127.0.0.1/?k={REDACTED}"
        assert sent["items"] == [REDACTED]
        assert failed["exception"][0]["exc_value"] == f"server rejected key {REDACTED}"

    def test_configured_secret_is_masked_in_console_output(self) -> None:
        """The console format masks the secret too, including in the rendered traceback."""
        out = io.StringIO()
        configure_logging(log_format="console", stream=out, secrets=[SECRET], environ={})
        log = get_logger("dreamer.test")
        try:
            raise ValueError(f"bad key {SECRET}")
        except ValueError:
            log.exception("failed", note=SECRET)
        assert SECRET not in out.getvalue()
        assert REDACTED in out.getvalue()

    def test_secret_in_a_stdlib_record_is_masked(self) -> None:
        """Records from the logging module (libraries) are masked as well."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out, secrets=[SECRET], environ={})
        logging.getLogger("httpx").warning("GET with key %s", SECRET)
        assert SECRET not in out.getvalue()

    def test_short_secret_is_only_masked_as_a_whole_value(self) -> None:
        """A very short secret masks values equal to it without shredding every word containing it."""
        redactor = SecretRedactor(["ab"])
        assert redactor.redact_text("ab") == REDACTED
        assert redactor.redact_text("about") == "about"

    def test_locals_are_not_logged(self) -> None:
        """Tracebacks carry no local variables (they could hold request headers)."""
        out = io.StringIO()
        configure_logging(log_format="json", stream=out, environ={})
        headers = {"x-custom": "value-only-in-locals"}
        try:
            raise RuntimeError(str(len(headers)))
        except RuntimeError:
            get_logger("dreamer.test").exception("failed")
        assert "value-only-in-locals" not in out.getvalue()


class TestRedactionOfPieces:
    """A secret leaks in pieces too: a prefix left by a cut, an escaped form, a split."""

    KEY = "hs-Zq7Xw2Lp9Vb4Nc8Rt5"

    @pytest.mark.parametrize(
        "text",
        [
            f"error body ... Bearer {KEY[:12]}",  # cut after 12 characters of the key
            f"{KEY[-9:]} was the tail",  # cut before the key
            json.dumps({"auth": f"Bearer {KEY}"}),
            "%s and %s" % (KEY[:10], KEY[10:]),  # noqa: UP031 - the split itself is the point
        ],
    )
    def test_no_eight_character_piece_survives(self, text: str) -> None:
        out = SecretRedactor([self.KEY]).redact_text(text)
        assert [self.KEY[i : i + 8] for i in range(len(self.KEY) - 7) if self.KEY[i : i + 8] in out] == []
        assert REDACTED in out

    def test_unrelated_text_is_untouched(self) -> None:
        text = "Hindsight rejected recall with HTTP 400: bank 'x' not found"
        assert SecretRedactor([self.KEY]).redact_text(text) == text
