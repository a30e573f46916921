"""The provider's turn writer: batching every N turns, sessions kept apart, a bounded queue."""

from __future__ import annotations

import threading

import pytest

from dreamer.errors import ConfigError
from dreamer.hermes_provider.settings import settings_from_hermes_json
from dreamer.hermes_provider.turns import TURN_SIDE_CHARS, TurnWriter, turn_text


class TestTurnWriter:
    def test_turns_are_stored_together_every_n_and_the_rest_on_close(self) -> None:
        """Five turns with every_n 2: two stores of two turns, and the fifth stored at close."""
        stored: list[tuple[str, list[str]]] = []
        writer = TurnWriter(lambda content, tags: stored.append((content, tags)), every_n=2)
        for i in range(5):
            writer.add(f"turn {i}", "s1")
        writer.close()
        assert [content for content, _ in stored] == ["turn 0\n\nturn 1", "turn 2\n\nturn 3", "turn 4"]
        assert all(tags == ["session:s1"] for _, tags in stored)
        assert writer.stats.stored == 3

    def test_a_new_session_flushes_the_old_ones_turns_under_their_own_tag(self) -> None:
        """Turns of two sessions are never stored as one memory."""
        stored: list[tuple[str, list[str]]] = []
        writer = TurnWriter(lambda content, tags: stored.append((content, tags)), every_n=10)
        writer.add("a1", "a")
        writer.add("b1", "b")
        writer.close()
        assert stored == [("a1", ["session:a"]), ("b1", ["session:b"])]

    def test_a_full_queue_drops_the_oldest_waiting_turn_and_counts_it(self) -> None:
        """While the store is stuck, turns beyond the queue limit drop the oldest; add never blocks."""
        gate = threading.Event()
        stored: list[str] = []

        def store(content: str, tags: list[str]) -> None:
            gate.wait(10)
            stored.append(content)

        writer = TurnWriter(store, limit=3)
        for i in range(10):
            writer.add(f"t{i}", "")
        gate.set()
        writer.close()
        assert writer.stats.dropped >= 6
        assert stored[-1] == "t9"

    def test_a_failing_store_is_counted_not_raised(self) -> None:
        """An exception in the store is recorded; later turns are still tried."""

        def store(content: str, tags: list[str]) -> None:
            raise RuntimeError("server down")

        writer = TurnWriter(store)
        writer.add("x", "s")
        writer.add("y", "s")
        writer.close()
        assert (writer.stats.failed, writer.stats.stored) == (2, 0)

    def test_after_close_turns_are_ignored(self) -> None:
        """A turn after shutdown is dropped quietly (Hermes may sync during exit)."""
        stored: list[str] = []
        writer = TurnWriter(lambda content, tags: stored.append(content))
        writer.close()
        writer.add("late", "s")
        assert stored == [] and writer.stats.stored == 0


class TestTurnText:
    def test_control_characters_and_huge_sides_are_tamed(self) -> None:
        """A turn is two lines: escapes and newlines flattened, each side cut at its limit."""
        text = turn_text("hi\x1b[31m\nthere", "x" * (TURN_SIDE_CHARS * 3))
        user, assistant = text.split("\n")
        assert "\x1b" not in user and user.startswith("User: hi")
        assert len(assistant) < TURN_SIDE_CHARS + 20 and assistant.endswith("…")


BASE: dict[str, object] = {"bank_id": "default", "banks": {"default": {"bankId": "b-default"}}}


class TestSettings:
    def test_auto_retain_and_every_n_are_read(self) -> None:
        """Hermes' keys auto_retain and retain_every_n_turns reach the provider's settings."""
        s = settings_from_hermes_json({**BASE, "auto_retain": False, "retain_every_n_turns": 3}, source="c")
        assert (s.auto_retain, s.retain_every_n_turns) == (False, 3)
        d = settings_from_hermes_json(BASE, source="c")
        assert (d.auto_retain, d.retain_every_n_turns) == (True, 1)

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("auto_retain", "yes"),
            ("retain_every_n_turns", 0),
            ("retain_every_n_turns", 10**9),
            ("retain_every_n_turns", True),
            ("retain_every_n_turns", 2.5),
        ],
    )
    def test_bad_values_name_the_file_and_key(self, key: str, value: object) -> None:
        """A wrong type or an out-of-range count is a ConfigError naming source and key."""
        with pytest.raises(ConfigError, match=f"^cfg.json: {key}: "):
            settings_from_hermes_json({**BASE, key: value}, source="cfg.json")
