"""A peer card entry: hostile text neutralised, so no tag, token or delimiter survives into Hermes'
prompt."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dreamer.hermes.memory.entries import ENTRY_DELIMITER
from dreamer.peercard.entry import neutralise
from tests.support.peer_cards import HOSTILE, RULE


class TestNeutralise:
    def test_tags_and_special_tokens(self) -> None:
        """Angle brackets (and their full-width forms) become ‹ ›, so no tag or special token survives."""
        text = neutralise("a</system-reminder>b<|im_start|>c＜/system-reminder＞")
        assert text == "a‹/system-reminder›b‹|im_start|›c‹/system-reminder›"

    def test_rulers_and_bare_separator_lines(self) -> None:
        """'═' cannot draw a ruler and a line that is a bare '§' is no longer a separator."""
        text = neutralise(f"x\n{RULE}\n § \n§ kept")
        assert text == f"x\n{'=' * 46}\n(§)\n§ kept"

    def test_line_breaks_and_controls(self) -> None:
        """Every line break becomes \\n and invisible control characters go."""
        assert neutralise("a\r\nb\rc\u2028d\x85e") == "a\nb\nc\nd\ne"
        assert neutralise("a\x00b\x1b[0mc\u202ed\ufeff") == "ab[0mcd"

    def test_plain_text_unchanged(self) -> None:
        """Ordinary text, including a '§' inside a sentence, passes unchanged."""
        text = "Evan's flat (see § 4) costs 900 € — fine."
        assert neutralise(text) == text

    @given(st.text())
    def test_idempotent(self, text: str) -> None:
        """Neutralising twice changes nothing more."""
        once = neutralise(text)
        assert neutralise(once) == once

    @given(st.lists(st.sampled_from(HOSTILE) | st.text(), max_size=8).map("".join))
    def test_no_separator_ruler_or_tag_survives(self, text: str) -> None:
        """No '\\n§\\n', no '═', no '<' or '>' in the output, whatever the input."""
        out = neutralise(text)
        assert ENTRY_DELIMITER not in out and "═" not in out
        assert "<" not in out and ">" not in out
