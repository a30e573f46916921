"""MemoryStore, row by row of the Hermes mechanism table, plus locking, atomicity and external edits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamer.hermes.memory.entries import ENTRY_DELIMITER, Target
from dreamer.hermes.memory.store import (
    AmbiguousMatchError,
    BatchError,
    EmptyContentError,
    ExternalEditError,
    MemoryStore,
    NoMatchError,
    Operation,
    OverBudgetError,
    StoreReadError,
)

# Written out literally (not imported) so the format is pinned independently of the code.
RULE = "══════════════════════════════════════════════"


def write_entries(path: Path, entries: list[str]) -> None:
    path.write_text("\n§\n".join(entries), encoding="utf-8")


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path, clock=lambda: 1_700_000_000.0)


class TestTwoFilesAndLimits:
    """Row: MEMORY.md is the agent's notes (2200 chars), USER.md the user profile (1375 chars)."""

    def test_targets_map_to_their_files(self, store: MemoryStore, tmp_path: Path) -> None:
        """`memory` is stored in MEMORY.md and `user` in USER.md."""
        store.add(Target.MEMORY, "note")
        store.add(Target.USER, "profile")
        assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == "note"
        assert (tmp_path / "USER.md").read_text(encoding="utf-8") == "profile"

    def test_default_limits_are_2200_and_1375(self, store: MemoryStore) -> None:
        """The default character limits are Hermes' 2200 (memory) and 1375 (user)."""
        assert store.limit_for(Target.MEMORY) == 2200
        assert store.limit_for(Target.USER) == 1375

    def test_memory_accepts_exactly_its_limit(self, store: MemoryStore) -> None:
        """An add that makes MEMORY.md exactly 2200 chars succeeds; one more char is refused."""
        store.add(Target.MEMORY, "x" * 1000)
        store.add(Target.MEMORY, "y" * (2200 - 1000 - 3))
        assert store.stats(Target.MEMORY).chars == 2200
        with pytest.raises(OverBudgetError):
            store.add(Target.MEMORY, "z")

    def test_user_limit_is_enforced(self, store: MemoryStore) -> None:
        """USER.md refuses an entry that would take it past 1375 chars."""
        store.add(Target.USER, "u" * 1375)
        with pytest.raises(OverBudgetError):
            store.add(Target.USER, "v")

    def test_custom_limits(self, tmp_path: Path) -> None:
        """Limits can be configured per store, as Hermes' memory_char_limit/user_char_limit allow."""
        small = MemoryStore(tmp_path, memory_char_limit=10, user_char_limit=5)
        small.add(Target.MEMORY, "0123456789")
        with pytest.raises(OverBudgetError):
            small.add(Target.USER, "123456")


class TestDelimiterAndSize:
    """Row: entries are separated by §, may span lines, and the limit counts characters."""

    def test_entries_are_joined_by_newline_section_newline(self, store: MemoryStore, tmp_path: Path) -> None:
        """Two entries are written as 'a\\n§\\nb' with no trailing newline."""
        store.add(Target.MEMORY, "a")
        store.add(Target.MEMORY, "b")
        assert ENTRY_DELIMITER == "\n§\n"
        assert (tmp_path / "MEMORY.md").read_bytes() == "a\n§\nb".encode()

    def test_multiline_entries_survive_a_round_trip(self, store: MemoryStore) -> None:
        """An entry with line breaks is one entry."""
        store.add(Target.MEMORY, "line one\nline two")
        store.add(Target.MEMORY, "other")
        assert store.list(Target.MEMORY) == ("line one\nline two", "other")

    def test_bare_section_sign_inside_an_entry_is_not_a_delimiter(self, store: MemoryStore) -> None:
        """Only the full '\\n§\\n' splits; '§ 3 of the contract' stays one entry."""
        store.add(Target.MEMORY, "see § 3 of the contract")
        assert store.list(Target.MEMORY) == ("see § 3 of the contract",)

    def test_size_is_characters_of_the_joined_text(self, store: MemoryStore) -> None:
        """Size counts characters (§ is one), including the delimiters between entries."""
        store.add(Target.MEMORY, "é" * 10)
        store.add(Target.MEMORY, "b" * 5)
        assert store.stats(Target.MEMORY).chars == 10 + 3 + 5

    def test_empty_and_whitespace_entries_are_dropped_on_read(
        self, store: MemoryStore, tmp_path: Path
    ) -> None:
        """Parsing strips entries and ignores empty ones, like Hermes' reader."""
        (tmp_path / "MEMORY.md").write_text("  a  \n§\n\n§\nb\n", encoding="utf-8")
        assert store.list(Target.MEMORY) == ("a", "b")

    def test_missing_file_is_empty(self, store: MemoryStore) -> None:
        """A store without files has no entries and zero usage."""
        assert store.list(Target.USER) == ()
        assert store.stats(Target.USER).chars == 0


class TestAddReplaceRemove:
    """Row: one tool with add / replace / remove (and batch, below)."""

    def test_add_appends_and_reports(self, store: MemoryStore) -> None:
        """add appends the stripped content and reports 'Entry added.'."""
        result = store.add(Target.MEMORY, "  first  ")
        assert result.message == "Entry added."
        assert result.changed
        assert store.list(Target.MEMORY) == ("first",)

    def test_add_rejects_empty_content(self, store: MemoryStore) -> None:
        """Blank content is an error, not an empty entry."""
        with pytest.raises(EmptyContentError, match="Content cannot be empty"):
            store.add(Target.MEMORY, "   ")

    def test_replace_swaps_the_matching_entry_in_place(self, store: MemoryStore) -> None:
        """replace keeps the entry's position."""
        for text in ("alpha", "beta", "gamma"):
            store.add(Target.MEMORY, text)
        result = store.replace(Target.MEMORY, "bet", "BETA")
        assert result.message == "Entry replaced."
        assert store.list(Target.MEMORY) == ("alpha", "BETA", "gamma")

    def test_replace_refuses_empty_new_content(self, store: MemoryStore) -> None:
        """Replacing with nothing is refused; remove is the way to delete."""
        store.add(Target.MEMORY, "alpha")
        with pytest.raises(EmptyContentError, match="Use 'remove'"):
            store.replace(Target.MEMORY, "alpha", " ")

    def test_replace_over_budget_is_refused(self, tmp_path: Path) -> None:
        """A replacement that would exceed the limit changes nothing."""
        small = MemoryStore(tmp_path, memory_char_limit=20)
        small.add(Target.MEMORY, "short")
        with pytest.raises(OverBudgetError):
            small.replace(Target.MEMORY, "short", "x" * 21)
        assert small.list(Target.MEMORY) == ("short",)

    def test_remove_deletes_the_matching_entry(self, store: MemoryStore) -> None:
        """remove drops the one entry containing old_text."""
        store.add(Target.USER, "likes tea")
        store.add(Target.USER, "lives in Oslo")
        result = store.remove(Target.USER, "tea")
        assert result.message == "Entry removed."
        assert store.list(Target.USER) == ("lives in Oslo",)

    def test_remove_rejects_empty_old_text(self, store: MemoryStore) -> None:
        """An empty old_text would match everything, so it is refused."""
        store.add(Target.USER, "x")
        with pytest.raises(EmptyContentError):
            store.remove(Target.USER, "  ")


class TestUniqueSubstring:
    """Row: replace/remove address an entry by a unique substring; hits in several entries conflict."""

    def test_no_match_lists_current_entries(self, store: MemoryStore) -> None:
        """A substring found nowhere fails and carries the current entries."""
        store.add(Target.MEMORY, "alpha")
        with pytest.raises(NoMatchError) as caught:
            store.remove(Target.MEMORY, "zeta")
        assert caught.value.current_entries == ("alpha",)

    def test_substring_in_two_distinct_entries_is_a_conflict(self, store: MemoryStore) -> None:
        """'port' in two different entries is ambiguous and nothing changes."""
        store.add(Target.MEMORY, "api port 8080")
        store.add(Target.MEMORY, "db port 5432")
        with pytest.raises(AmbiguousMatchError) as caught:
            store.replace(Target.MEMORY, "port", "x")
        assert caught.value.matches == ("api port 8080", "db port 5432")
        assert store.list(Target.MEMORY) == ("api port 8080", "db port 5432")

    def test_conflict_previews_are_cut_at_80_chars(self, store: MemoryStore) -> None:
        """Conflict previews show the first 80 characters followed by '...'."""
        store.add(Target.MEMORY, "k" + "a" * 100)
        store.add(Target.MEMORY, "k" + "b" * 100)
        with pytest.raises(AmbiguousMatchError) as caught:
            store.remove(Target.MEMORY, "k")
        assert caught.value.matches[0] == "k" + "a" * 79 + "..."

    def test_identical_copies_are_not_a_conflict(self, store: MemoryStore, tmp_path: Path) -> None:
        """Matches that are all the same text act on it (exact repeats are collapsed on load)."""
        write_entries(tmp_path / "MEMORY.md", ["same", "same", "other"])
        store.remove(Target.MEMORY, "sam")
        assert store.list(Target.MEMORY) == ("other",)

    def test_exact_mode_addresses_a_substring_entry(self, store: MemoryStore) -> None:
        """exact=True picks the entry equal to old_text even when it is inside another entry."""
        store.add(Target.MEMORY, "port")
        store.add(Target.MEMORY, "port 8080")
        store.remove(Target.MEMORY, "port", exact=True)
        assert store.list(Target.MEMORY) == ("port 8080",)


class TestBatch:
    """Row: batch applies all operations or none, judged on the final size."""

    def test_batch_applies_in_order(self, store: MemoryStore) -> None:
        """add, replace and remove in one call, in the given order."""
        store.add(Target.MEMORY, "old")
        store.add(Target.MEMORY, "drop me")
        result = store.batch(
            Target.MEMORY,
            [Operation.replace("old", "new"), Operation.remove("drop"), Operation.add("added")],
        )
        assert result.message == "Applied 3 operation(s)."
        assert store.list(Target.MEMORY) == ("new", "added")

    def test_budget_is_checked_on_the_final_state_only(self, tmp_path: Path) -> None:
        """Removing and adding in one batch succeeds even though the add alone would overflow."""
        small = MemoryStore(tmp_path, memory_char_limit=12)
        small.add(Target.MEMORY, "aaaaaaaaaa")
        small.batch(Target.MEMORY, [Operation.add("bbbbbbbbbb"), Operation.remove("aaa")])
        assert small.list(Target.MEMORY) == ("bbbbbbbbbb",)

    def test_one_failing_operation_applies_nothing(self, store: MemoryStore, tmp_path: Path) -> None:
        """A non-matching third operation leaves the file byte-for-byte unchanged."""
        store.add(Target.MEMORY, "keep")
        before = (tmp_path / "MEMORY.md").read_bytes()
        with pytest.raises(BatchError, match=r"Operation 3 \(remove\).*all-or-nothing") as caught:
            store.batch(
                Target.MEMORY, [Operation.add("x"), Operation.replace("keep", "k2"), Operation.remove("nope")]
            )
        assert caught.value.index == 3
        assert (tmp_path / "MEMORY.md").read_bytes() == before

    def test_final_overflow_applies_nothing(self, tmp_path: Path) -> None:
        """A batch whose end state exceeds the limit is refused as a whole."""
        small = MemoryStore(tmp_path, memory_char_limit=10)
        small.add(Target.MEMORY, "abc")
        with pytest.raises(OverBudgetError, match="over the limit"):
            small.batch(Target.MEMORY, [Operation.add("0123456789")])
        assert small.list(Target.MEMORY) == ("abc",)

    def test_duplicate_add_inside_a_batch_is_skipped(self, store: MemoryStore) -> None:
        """Adding an entry that exists is idempotent inside a batch, not a failure."""
        store.add(Target.MEMORY, "same")
        store.batch(Target.MEMORY, [Operation.add("same"), Operation.add("new")])
        assert store.list(Target.MEMORY) == ("same", "new")

    def test_ambiguous_operation_fails_the_batch(self, store: MemoryStore) -> None:
        """A substring matching two distinct entries aborts the batch."""
        store.add(Target.MEMORY, "port 1")
        store.add(Target.MEMORY, "port 2")
        with pytest.raises(BatchError, match="multiple distinct entries"):
            store.batch(Target.MEMORY, [Operation.remove("port")])

    def test_empty_batch_is_refused(self, store: MemoryStore) -> None:
        """An empty operation list is an error."""
        with pytest.raises(BatchError, match="empty"):
            store.batch(Target.MEMORY, [])


class TestOverLimitNotDropped:
    """Row: an add over the limit is not silently dropped; the current entries come back."""

    def test_over_budget_add_returns_current_entries_and_usage(self, tmp_path: Path) -> None:
        """The error carries the entries to consolidate and the usage, and the file is unchanged."""
        small = MemoryStore(tmp_path, memory_char_limit=12)
        small.add(Target.MEMORY, "one")
        small.add(Target.MEMORY, "two")
        with pytest.raises(OverBudgetError) as caught:
            small.add(Target.MEMORY, "three")
        assert caught.value.current_entries == ("one", "two")
        assert str(caught.value.usage) == "75% — 9/12 chars"
        assert "Memory at 9/12 chars" in str(caught.value)
        assert small.list(Target.MEMORY) == ("one", "two")


class TestDuplicateAdd:
    """Row: add de-duplicates: the same text is never stored twice."""

    def test_exact_duplicate_is_success_without_write(self, store: MemoryStore, tmp_path: Path) -> None:
        """A repeated add reports that the entry exists and does not rewrite the file."""
        store.add(Target.USER, "likes tea")
        inode = (tmp_path / "USER.md").stat().st_ino
        result = store.add(Target.USER, "likes tea")
        assert result.message == "Entry already exists (no duplicate added)."
        assert not result.changed
        assert store.list(Target.USER) == ("likes tea",)
        assert (tmp_path / "USER.md").stat().st_ino == inode

    def test_duplicate_after_stripping_is_a_duplicate(self, store: MemoryStore) -> None:
        """Surrounding whitespace does not make a new entry."""
        store.add(Target.USER, "likes tea")
        assert not store.add(Target.USER, "  likes tea\n").changed


class TestFrozenSnapshot:
    """Row: the snapshot is rendered once per session in Hermes' exact format and frozen."""

    def test_memory_block_format(self, store: MemoryStore) -> None:
        """Rule, header with percent and thousands separators, rule, then the joined entries."""
        store.add(Target.MEMORY, "first entry")
        store.add(Target.MEMORY, "second")
        expected = (
            f"{RULE}\nMEMORY (your personal notes) [0% — 20/2,200 chars]\n{RULE}\nfirst entry\n§\nsecond"
        )
        assert store.render(Target.MEMORY) == expected

    def test_user_block_format(self, store: MemoryStore) -> None:
        """USER.md uses the 'USER PROFILE (who the user is)' header."""
        store.add(Target.USER, "u" * 700)
        expected = f"{RULE}\nUSER PROFILE (who the user is) [50% — 700/1,375 chars]\n{RULE}\n" + "u" * 700
        assert store.render(Target.USER) == expected

    def test_empty_file_renders_nothing(self, store: MemoryStore) -> None:
        """A file without entries contributes no block."""
        assert store.render(Target.USER) == ""

    def test_writes_after_load_do_not_change_the_snapshot(self, store: MemoryStore) -> None:
        """Mid-session writes leave the rendered block as it was at load time."""
        store.add(Target.MEMORY, "before")
        store.load()
        frozen = store.render(Target.MEMORY)
        store.add(Target.MEMORY, "after")
        assert store.render(Target.MEMORY) == frozen
        store.load()
        assert store.render(Target.MEMORY).endswith("before\n§\nafter")

    def test_snapshot_drops_exact_repeats(self, store: MemoryStore, tmp_path: Path) -> None:
        """Repeated entries in the file appear once in the snapshot, as Hermes de-duplicates on load."""
        write_entries(tmp_path / "MEMORY.md", ["a", "a", "b"])
        assert store.render(Target.MEMORY).endswith(f"{RULE}\na\n§\nb")


class TestWriteResult:
    """Row: a successful write reports usage as '{pct}% — {current:,}/{limit:,} chars'."""

    def test_usage_string(self, store: MemoryStore) -> None:
        """Usage is truncated whole percent, thousands-separated counts."""
        result = store.add(Target.MEMORY, "x" * 1100)
        assert str(result.usage) == "50% — 1,100/2,200 chars"
        assert result.entry_count == 1


class TestLockingAndAtomicWrites:
    """Writes take the sidecar .lock, re-read under it and replace the file atomically."""

    def test_lock_file_is_a_sidecar(self, store: MemoryStore, tmp_path: Path) -> None:
        """A write creates MEMORY.md.lock next to MEMORY.md."""
        store.add(Target.MEMORY, "x")
        assert (tmp_path / "MEMORY.md.lock").exists()

    def test_write_replaces_the_file_instead_of_rewriting_it(
        self, store: MemoryStore, tmp_path: Path
    ) -> None:
        """The file gets a new inode on every write (temp file + rename) and no temp file remains."""
        store.add(Target.MEMORY, "x")
        inode = (tmp_path / "MEMORY.md").stat().st_ino
        store.add(Target.MEMORY, "y")
        assert (tmp_path / "MEMORY.md").stat().st_ino != inode
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    def test_every_write_leaves_mode_0600(self, store: MemoryStore, tmp_path: Path) -> None:
        """A file made 0644 is 0600 after the next write, as Hermes leaves it."""
        store.add(Target.MEMORY, "x")
        os.chmod(tmp_path / "MEMORY.md", 0o644)
        store.add(Target.MEMORY, "y")
        assert (tmp_path / "MEMORY.md").stat().st_mode & 0o777 == 0o600

    def test_each_write_rereads_the_file(self, tmp_path: Path) -> None:
        """Two stores on one directory never overwrite each other's entries."""
        first, second = MemoryStore(tmp_path), MemoryStore(tmp_path)
        first.add(Target.MEMORY, "from first")
        second.add(Target.MEMORY, "from second")
        first.remove(Target.MEMORY, "from second")
        assert second.list(Target.MEMORY) == ("from first",)

    def test_unreadable_file_is_an_error_not_empty(self, store: MemoryStore, tmp_path: Path) -> None:
        """A file that is not UTF-8 raises instead of being treated as empty (and overwritten)."""
        (tmp_path / "MEMORY.md").write_bytes(b"\xff\xfe broken")
        with pytest.raises(StoreReadError, match="UTF-8"):
            store.add(Target.MEMORY, "x")
        assert (tmp_path / "MEMORY.md").read_bytes() == b"\xff\xfe broken"

    def test_first_write_creates_the_memories_directory(self, tmp_path: Path) -> None:
        """Like Hermes, a store on a directory that does not exist yet creates it on the first write."""
        store = MemoryStore(tmp_path / "new" / "memories")
        store.add(Target.USER, "hello")
        assert (tmp_path / "new" / "memories" / "USER.md").read_text(encoding="utf-8") == "hello"


class TestExternalEdit:
    """A file edited outside the store is saved as .bak.<timestamp> and the write is refused."""

    def test_hand_edited_spacing_is_refused_with_backup(self, store: MemoryStore, tmp_path: Path) -> None:
        """Blank lines around § (an editor's touch) block replace and leave a byte-exact backup."""
        raw = "first\n\n§\n\nsecond\n"
        (tmp_path / "MEMORY.md").write_text(raw, encoding="utf-8")
        with pytest.raises(ExternalEditError) as caught:
            store.replace(Target.MEMORY, "first", "changed")
        backup = tmp_path / "MEMORY.md.bak.1700000000"
        assert caught.value.backup_path == backup
        assert backup.read_text(encoding="utf-8") == raw
        assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == raw

    def test_appended_block_larger_than_the_limit_is_refused(self, tmp_path: Path) -> None:
        """Free text appended to the last entry making it bigger than the file limit blocks remove."""
        small = MemoryStore(tmp_path, memory_char_limit=50, clock=lambda: 42.0)
        small.add(Target.MEMORY, "keep")
        small.add(Target.MEMORY, "last")
        with open(tmp_path / "MEMORY.md", "a", encoding="utf-8") as handle:
            handle.write("\n" + "pasted notes " * 10)
        with pytest.raises(ExternalEditError):
            small.remove(Target.MEMORY, "keep")
        assert (tmp_path / "MEMORY.md.bak.42").exists()
        assert "keep" in (tmp_path / "MEMORY.md").read_text(encoding="utf-8")

    def test_batch_is_refused_too(self, store: MemoryStore, tmp_path: Path) -> None:
        """batch applies the same external-edit check as replace and remove."""
        (tmp_path / "USER.md").write_text("a \n§\nb", encoding="utf-8")
        with pytest.raises(ExternalEditError):
            store.batch(Target.USER, [Operation.add("c")])

    def test_add_skips_the_check_as_in_hermes(self, store: MemoryStore, tmp_path: Path) -> None:
        """add only appends, so a hand-spaced file accepts it and keeps every entry."""
        (tmp_path / "MEMORY.md").write_text("first\n\n§\n\nsecond\n", encoding="utf-8")
        store.add(Target.MEMORY, "third")
        assert store.list(Target.MEMORY) == ("first", "second", "third")
        assert not list(tmp_path.glob("MEMORY.md.bak.*"))

    def test_a_second_backup_in_the_same_second_does_not_overwrite(self, tmp_path: Path) -> None:
        """Two different drifted contents within one second get two backups."""
        store = MemoryStore(tmp_path, clock=lambda: 7.0)
        (tmp_path / "MEMORY.md").write_text("a\n\n§\nb", encoding="utf-8")
        with pytest.raises(ExternalEditError):
            store.remove(Target.MEMORY, "a")
        (tmp_path / "MEMORY.md").write_text("c\n\n§\nd", encoding="utf-8")
        with pytest.raises(ExternalEditError) as caught:
            store.remove(Target.MEMORY, "c")
        assert caught.value.backup_path == tmp_path / "MEMORY.md.bak.7.1"
        assert (tmp_path / "MEMORY.md.bak.7").read_text(encoding="utf-8") == "a\n\n§\nb"

    def test_tool_shaped_file_written_by_someone_else_is_accepted(
        self, store: MemoryStore, tmp_path: Path
    ) -> None:
        """A clean §-list written by another writer is merged, not treated as drift."""
        write_entries(tmp_path / "MEMORY.md", ["from hermes", "another"])
        store.remove(Target.MEMORY, "another")
        assert store.list(Target.MEMORY) == ("from hermes",)
