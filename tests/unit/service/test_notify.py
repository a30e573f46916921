"""sd_notify messages: always deliverable text, the right fields, and silence without systemd."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamer.service.notify import (
    MAX_VALUE_CHARS,
    Notifier,
    format_message,
    sanitize_value,
    watchdog_interval_s,
)


class TestSanitizeValue:
    def test_plain_ascii_is_unchanged(self) -> None:
        """Printable ASCII passes through untouched."""
        text = "3 profiles; last: research promoted 12:00Z; next: homelab 13:02Z"
        assert sanitize_value(text) == text

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("a — b", "a - b"),
            ("a – b", "a - b"),
            ("done ✓", "done ok"),
            ("done ✔", "done ok"),
            ("failed ✗", "failed x"),
            ("“quoted” ‘word’", "\"quoted\" 'word'"),
            ("wait…", "wait..."),
            ("a → b", "a -> b"),
        ],
    )
    def test_common_symbols_are_transliterated(self, text: str, expected: str) -> None:
        """Dashes, check marks, curly quotes, ellipses and arrows become their ASCII spelling."""
        assert sanitize_value(text) == expected

    def test_accents_are_stripped_to_the_base_letter(self) -> None:
        """Latin letters with diacritics keep their base letter (Latin-1 bytes are not valid UTF-8)."""
        assert sanitize_value("café naïve Ångström Łódź") == "cafe naive Angstrom Lodz"

    def test_untransliterable_characters_become_question_marks(self) -> None:
        """Characters with no ASCII spelling are replaced, one `?` each, never dropped silently."""
        assert sanitize_value("bank 記憶 ok") == "bank ?? ok"

    def test_newlines_cannot_start_a_new_assignment(self) -> None:
        """A newline in a value would inject a KEY=value line into the datagram; it becomes a space."""
        assert sanitize_value("reload failed: x\nREADY=1") == "reload failed: x READY=1"

    def test_long_values_are_capped(self) -> None:
        """Values longer than the cap are cut and marked with an ellipsis."""
        result = sanitize_value("x" * (MAX_VALUE_CHARS * 2))
        assert len(result) == MAX_VALUE_CHARS
        assert result.endswith("...")

    @given(st.text())
    def test_any_text_becomes_one_line_of_printable_ascii(self, text: str) -> None:
        """Whatever the input, the output encodes as Latin-1 and UTF-8 alike and has no line break."""
        result = sanitize_value(text)
        assert all(" " <= c <= "~" for c in result)
        assert len(result) <= MAX_VALUE_CHARS


class TestFormatMessage:
    def test_fields_are_newline_separated_assignments(self) -> None:
        """Fields are joined as KEY=value lines in order; values are sanitised."""
        assert format_message({"READY": 1, "STATUS": "ok ✓"}) == "READY=1\nSTATUS=ok ok"

    @pytest.mark.parametrize("key", ["", "status", "READY=1", "STATUS\nREADY", "ÉTAT"])
    def test_bad_field_names_are_refused(self, key: str) -> None:
        """Only upper-case ASCII names are valid sd_notify fields."""
        with pytest.raises(ValueError, match="not an sd_notify field name"):
            format_message({key: "x"})


class TestWatchdogInterval:
    def test_half_of_watchdog_usec(self) -> None:
        """Pings are due every WATCHDOG_USEC / 2, in seconds."""
        assert watchdog_interval_s({"WATCHDOG_USEC": "30000000"}) == 15.0

    @pytest.mark.parametrize("value", ["", "0", "-5", "soon"])
    def test_no_watchdog_without_a_positive_value(self, value: str) -> None:
        """An unset, zero, negative or malformed WATCHDOG_USEC means no watchdog."""
        assert watchdog_interval_s({"WATCHDOG_USEC": value}) is None
        assert watchdog_interval_s({}) is None

    def test_watchdog_meant_for_another_process_is_ignored(self) -> None:
        """WATCHDOG_PID naming another process (an inherited environment) disables pinging."""
        env = {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
        assert watchdog_interval_s(env, pid=4242) is None
        assert watchdog_interval_s(env, pid=1) == 0.5


class _Listener:
    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(5)

    def receive(self) -> str:
        return self.sock.recv(65536).decode("utf-8")


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Listener]:
    directory = tempfile.mkdtemp(prefix="dn-", dir="/tmp")
    path = os.path.join(directory, "notify")
    recv = _Listener(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    try:
        yield recv
    finally:
        recv.sock.close()
        os.unlink(path)
        Path(directory).rmdir()


class TestNotifier:
    def test_status_with_non_latin1_text_is_delivered(self, listener: _Listener) -> None:
        """A STATUS the bare transport would drop ("—", "✓") arrives, transliterated."""
        notifier = Notifier.from_environ()
        assert notifier.status("research — promoted ✓")
        assert listener.receive() == "STATUS=research - promoted ok"

    def test_lifecycle_messages(self, listener: _Listener) -> None:
        """ready, watchdog, reloading (with MONOTONIC_USEC) and stopping send the protocol's fields."""
        notifier = Notifier.from_environ()
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        notifier.ready(status="1 profile")
        notifier.watchdog()
        notifier.reloading()
        notifier.stopping()
        assert listener.receive() == "READY=1\nSTATUS=1 profile"
        assert listener.receive() == "WATCHDOG=1"
        reloading = listener.receive().split("\n")
        assert reloading[0] == "RELOADING=1"
        key, _, usec = reloading[1].partition("=")
        assert key == "MONOTONIC_USEC"
        assert int(usec) >= before
        assert listener.receive() == "STOPPING=1"
        assert notifier.sent == 4

    def test_abstract_socket_address(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An `@name` NOTIFY_SOCKET is the Linux abstract namespace and works the same."""
        name = f"dreamer-test-{os.getpid()}-{time.monotonic_ns()}"
        recv = _Listener("\0" + name)
        try:
            monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
            assert Notifier.from_environ().ready()
            assert recv.receive() == "READY=1"
        finally:
            recv.sock.close()

    def test_without_notify_socket_everything_is_a_no_op(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Outside systemd nothing is sent and nothing fails."""
        monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
        notifier = Notifier.from_environ()
        assert not notifier.enabled
        assert notifier.ready(status="x") is False
        assert notifier.sent == 0

    def test_unreachable_socket_disables_notifying(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """A NOTIFY_SOCKET that does not exist is not an error: notifications are simply off."""
        monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "missing"))
        notifier = Notifier.from_environ()
        assert not notifier.enabled
        assert notifier.status("x") is False
