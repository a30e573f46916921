"""Reading memory limits from Hermes' config.yaml, as pure functions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamer.hermes.memory.limits import (
    MemoryLimits,
    MemoryLimitsError,
    hermes_config_path,
    parse_memory_limits,
    read_memory_limits,
)


class TestParseMemoryLimits:
    """The top-level `memory` mapping's two keys; everything else is left alone."""

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("", MemoryLimits(2200, 1375)),
            ("model: x\n", MemoryLimits(2200, 1375)),
            ("memory:\n  memory_char_limit: 1800\n  user_char_limit: 600\n", MemoryLimits(1800, 600)),
            ("memory:\n  user_char_limit: '600'  # quoted\n", MemoryLimits(2200, 600)),
            ("memory:\n\n  # note\n    \n  user_char_limit: 600\nother: 1\n", MemoryLimits(2200, 600)),
            ("agent:\n  memory:\n    user_char_limit: 5\n", MemoryLimits(2200, 1375)),
            ("memory:\n  nested:\n    user_char_limit: 5\n  user_char_limit: 70\n", MemoryLimits(2200, 70)),
            ("memory:\nuser_char_limit: 5\n", MemoryLimits(2200, 1375)),
            ("memory: ~\n", MemoryLimits(2200, 1375)),
            ("memory:\n  user_char_limit: 99999999999999999999\n", MemoryLimits(2200, 99999999999999999999)),
        ],
    )
    def test_shapes(self, text: str, expected: MemoryLimits) -> None:
        """Absent keys keep Hermes' defaults; only direct children of top-level `memory` count."""
        assert parse_memory_limits(text) == expected

    @pytest.mark.parametrize(
        "value",
        ["0", "-5", "lots", "12.5", "''", "1e3", "[1]", "9" * 5000],
        ids=lambda v: f"value={v[:20]}",
    )
    def test_a_bad_value_names_the_key(self, value: str) -> None:
        """Anything but a positive whole number is an error naming file and key, never a default."""
        expected = r"^cfg\.yaml: memory\.user_char_limit: expected a positive"
        with pytest.raises(MemoryLimitsError, match=expected):
            parse_memory_limits(f"memory:\n  user_char_limit: {value}\n", "cfg.yaml")

    def test_a_flow_mapping_is_not_guessed(self) -> None:
        """`memory: {user_char_limit: 5}` is reported, since the parser cannot read it."""
        with pytest.raises(MemoryLimitsError, match="memory: expected a mapping"):
            parse_memory_limits("memory: {user_char_limit: 5}\n")

    def test_files(self, tmp_path: Path) -> None:
        """No path or no file: the defaults given; a file that is not UTF-8: an error naming it."""
        assert read_memory_limits(None) == MemoryLimits()
        assert read_memory_limits(tmp_path / "missing.yaml", MemoryLimits(10, 20)) == MemoryLimits(10, 20)
        bad = tmp_path / "config.yaml"
        bad.write_bytes(b"\xff\xfe")
        with pytest.raises(MemoryLimitsError, match=r"config\.yaml"):
            read_memory_limits(bad)
        assert hermes_config_path(tmp_path / "memories", None) == tmp_path / "config.yaml"

    def test_a_fifo_or_device_is_an_error_not_a_hang(self, tmp_path: Path) -> None:
        """A FIFO at config.yaml (which would block the audit for ever) or a link to /dev/zero
        (read without end) is a MemoryLimitsError naming the file."""
        path = tmp_path / "config.yaml"
        os.mkfifo(path)
        with pytest.raises(MemoryLimitsError, match="not a regular file"):
            read_memory_limits(path)
        path.unlink()
        path.symlink_to("/dev/zero")
        with pytest.raises(MemoryLimitsError, match="not a regular file"):
            read_memory_limits(path)
