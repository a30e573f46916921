"""Canary lines: the lines holding the marker, and the entries they protect."""

from __future__ import annotations

from dreamer.hermes.audit.canary import canary_lines, is_canary_entry


class TestCanaryLines:
    def test_canary_lines(self) -> None:
        """Only lines containing the marker are canary lines; entries holding one are protected."""
        raw = "x\nCANARY: Do not modify this line (mumuni)\n§\ny"
        assert canary_lines(raw) == ("CANARY: Do not modify this line (mumuni)",)
        assert is_canary_entry("a\nCANARY: Do not modify this line")
