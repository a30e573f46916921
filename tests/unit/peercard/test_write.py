"""A peer card written safely: private to its owner, never empty, never read half-written."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from dreamer.peercard.write import write_peer_card


class TestWrite:
    def test_write_is_0600_and_leaves_no_temp_file(self, tmp_path: Path) -> None:
        """The card file is private to its owner and only the card remains in the directory."""
        target = tmp_path / "cards" / "research.md"
        write_peer_card(target, "one")
        target.chmod(0o644)
        write_peer_card(target, "two")
        assert target.read_text(encoding="utf-8") == "two"
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert os.listdir(target.parent) == ["research.md"]

    def test_never_written_empty(self, tmp_path: Path) -> None:
        """Empty text is refused and an existing card is left as it was."""
        target = tmp_path / "card.md"
        write_peer_card(target, "kept")
        with pytest.raises(ValueError, match="never written empty"):
            write_peer_card(target, " \n")
        assert target.read_text(encoding="utf-8") == "kept"

    def test_reader_never_sees_a_partial_file(self, tmp_path: Path) -> None:
        """A reader looping while many writes happen only ever reads complete versions."""
        target = tmp_path / "card.md"
        versions = [f"version {i}\n" + chr(0x41 + i % 26) * (20_000 + 997 * i) for i in range(60)]
        write_peer_card(target, versions[0])
        complete = set(versions)
        seen: list[str] = []
        bad: list[int] = []
        done = threading.Event()

        def read_loop() -> None:
            while not done.is_set():
                text = target.read_text(encoding="utf-8")
                seen.append(text[:12])
                if text not in complete:
                    bad.append(len(text))

        reader = threading.Thread(target=read_loop)
        reader.start()
        try:
            for text in versions[1:]:
                write_peer_card(target, text)
        finally:
            done.set()
            reader.join()
        assert bad == []
        assert seen
        assert target.read_text(encoding="utf-8") == versions[-1]
