"""Configuration errors: every kind names the file and the key, and says what is allowed or what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamer.config import default_config_path, load_config, parse_config
from dreamer.errors import ConfigError
from tests.support.configs import SOURCE, config_data, config_with, problems, section, write_toml


class TestUnknownKeys:
    def test_top_level(self) -> None:
        """An unknown top-level key is named and the fix (spelling, example file) suggested."""
        (line,) = problems(lambda d: d.update(sheduler={}))
        assert line.startswith(f"{SOURCE}: sheduler: unknown key")
        assert "the top level" in line and "config.example.toml" in line

    def test_nested(self) -> None:
        """An unknown key in a table names the full key path and the table."""
        (line,) = problems(lambda d: section(d, "schedule").update(intervall_minutes=5))
        assert line.startswith(f"{SOURCE}: schedule.intervall_minutes: unknown key")
        assert "[schedule]" in line

    def test_inside_a_named_profile(self) -> None:
        """Keys inside a named table are reported with the name in the path."""
        (line,) = problems(lambda d: d["profiles"]["research"].update(uplink="global"))
        assert line.startswith(f"{SOURCE}: profiles.research.uplink: unknown key")


class TestWrongValues:
    def test_wrong_type(self) -> None:
        """A string where a number belongs names the key and echoes the bad value."""
        (line,) = problems(lambda d: section(d, "schedule").update(interval_minutes="often"))
        assert line.startswith(f"{SOURCE}: schedule.interval_minutes: ")
        assert "valid number" in line and "'often'" in line

    def test_out_of_range(self) -> None:
        """A number outside its bounds says which bound."""
        (line,) = problems(lambda d: section(d, "schedule").update(jitter_s=-1))
        assert line.startswith(f"{SOURCE}: schedule.jitter_s: ")
        assert "greater than or equal to 0" in line

    def test_not_one_of_the_allowed_words(self) -> None:
        """A value outside a fixed set lists the allowed values."""
        (line,) = problems(lambda d: section(d, "backend").update(kind="redis"))
        assert line == f"{SOURCE}: backend.kind: got 'redis'; allowed: 'embedded' or 'hindsight'"

    def test_invalid_bank_id(self) -> None:
        """A bank id with forbidden characters names the key and the allowed pattern."""
        (line,) = problems(lambda d: d["banks"]["research"].update(bank_id="has space"))
        assert line.startswith(f"{SOURCE}: banks.research.bank_id: 'has space' is not a valid name")

    def test_invalid_alias(self) -> None:
        """A bank alias that is not a lower-case name is reported with the alias."""
        (line,) = problems(lambda d: d["banks"].update({"Research X": {"bank_id": "x"}}))
        assert line.startswith(f"{SOURCE}: banks: ")
        assert "'Research X' is not a valid name" in line

    def test_scalar_where_a_table_belongs(self) -> None:
        """`backend = "x"` says a table is needed instead of crashing."""
        (line,) = problems(lambda d: d.update(backend="x"))
        assert line == f"{SOURCE}: backend: must be a table ([backend]), got 'x'"

    def test_missing_required_key(self) -> None:
        """A bank without bank_id says the key is required."""
        (line,) = problems(lambda d: d["banks"].update(empty={}))
        assert line == f"{SOURCE}: banks.empty.bank_id: required key is missing"

    def test_bad_url(self) -> None:
        """The Hindsight URL must be http(s)."""
        (line,) = problems(lambda d: section(d, "backend", "hindsight").update(url="ftp://x"))
        assert line.startswith(f"{SOURCE}: backend.hindsight.url: ")
        assert "http:// or https://" in line

    def test_table_of_the_wrong_shape(self) -> None:
        """A list where a table of profiles belongs is named."""
        (line,) = problems(lambda d: d.update(profiles=["research"]))
        assert line.startswith(f"{SOURCE}: profiles: ")

    def test_every_problem_is_listed(self) -> None:
        """Several mistakes are reported together, not one per attempt."""
        lines = problems(lambda d: section(d, "schedule").update(interval_minutes=0, jitter_s=-1, bogus=True))
        assert sorted(line.split(": ")[1] for line in lines) == [
            "schedule.bogus",
            "schedule.interval_minutes",
            "schedule.jitter_s",
        ]


class TestCrossReferences:
    def test_unknown_profile_bank_lists_known_aliases(self) -> None:
        """A profile pointing at an undefined bank alias names the key, the alias and the known aliases."""
        (line,) = problems(lambda d: d["profiles"]["research"].update(bank="reserch"))
        assert line == (
            f"{SOURCE}: profiles.research.bank: unknown bank alias 'reserch' "
            "(known: global, research, shared)"
        )

    def test_unknown_upstream_and_read_union_entries(self) -> None:
        """upstream and each read_union entry are checked, with the list index in the key."""
        lines = problems(
            lambda d: d["profiles"]["research"].update(upstream="globl", read_union=["research", "zz"])
        )
        assert [line.split(": ")[1] for line in lines] == [
            "profiles.research.upstream",
            "profiles.research.read_union[1]",
        ]

    def test_unknown_topology_aliases(self) -> None:
        """topology.global, topology.shared and topology.default_bank must name defined banks."""
        lines = problems(
            lambda d: section(d, "topology").update({"global": "g", "shared": "s", "default_bank": "d"})
        )
        assert [line.split(": ")[1] for line in lines] == [
            "topology.global",
            "topology.shared",
            "topology.default_bank",
        ]

    def test_no_banks_at_all(self) -> None:
        """With no [banks] the message says none are defined."""
        lines = problems(lambda d: d.update(banks={}))
        assert "none defined under [banks]" in lines[0]

    def test_duplicate_bank_ids(self) -> None:
        """Two aliases for one bank id: the second is named, with the alias that already uses it."""
        (line,) = problems(lambda d: d["banks"].update(copy={"bank_id": "private__hermes__research"}))
        assert line.startswith(f"{SOURCE}: banks.copy.bank_id: bank id 'private__hermes__research'")
        assert "already used by banks.research" in line

    def test_profile_bank_cannot_be_its_upstream(self) -> None:
        (line,) = problems(lambda d: d["profiles"]["research"].update(upstream="research"))
        assert line.startswith(f"{SOURCE}: profiles.research.upstream: ")

    def test_shared_bank_cannot_be_a_profile_bank(self) -> None:
        (line,) = problems(lambda d: d["profiles"].update(everyone={"bank": "shared"}))
        assert line.startswith(f"{SOURCE}: profiles.everyone.bank: the shared bank")


class TestFiles:
    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing config file says how to pass one."""
        with pytest.raises(ConfigError) as caught:
            load_config(tmp_path / "config.toml")
        (line,) = caught.value.problems
        assert line.startswith(f"{tmp_path / 'config.toml'}: file not found")
        assert "--config" in line

    def test_invalid_toml(self, tmp_path: Path) -> None:
        """A TOML syntax error names the file and the parser's position."""
        path = tmp_path / "config.toml"
        path.write_text("[schedule\n")
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert caught.value.problems[0].startswith(f"{path}: invalid TOML: ")
        assert "line 1" in caught.value.problems[0]

    def test_not_utf8(self, tmp_path: Path) -> None:
        """A file that is not UTF-8 says so and where."""
        path = tmp_path / "config.toml"
        path.write_bytes(b'state_dir = "\xff"\n')
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert caught.value.problems[0].startswith(f"{path}: not UTF-8")

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("x = " + "9" * 5000 + "\n", "invalid TOML (ValueError"),
            ("x = " + "[" * 50_000 + "]" * 50_000 + "\n", "invalid TOML (RecursionError"),
            ("x = '" + "a" * 1_000_001 + "'\n", "larger than 1000000 bytes"),
        ],
    )
    def test_a_hostile_file_is_a_config_error(self, tmp_path: Path, text: str, expected: str) -> None:
        """An integer of thousands of digits, nesting too deep for the parser or a huge file is a
        ConfigError naming the file, not a traceback."""
        path = tmp_path / "config.toml"
        path.write_text(text)
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert caught.value.problems[0].startswith(f"{path}: {expected}")

    def test_a_fifo_or_device_is_refused_without_reading(self, tmp_path: Path) -> None:
        """A FIFO at the path (which would block the daemon's start) or a link to /dev/zero (read
        without end) is refused as not a regular file."""
        path = tmp_path / "config.toml"
        os.mkfifo(path)
        with pytest.raises(ConfigError, match="not a regular file"):
            load_config(path)
        path.unlink()
        path.symlink_to("/dev/zero")
        with pytest.raises(ConfigError, match="not a regular file"):
            load_config(path)

    def test_errors_carry_the_file_name(self, tmp_path: Path) -> None:
        """Messages from a loaded file start with that file's path."""
        path = tmp_path / "config.toml"
        path.write_text("bogus = 1\n")
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert caught.value.problems[0].startswith(f"{path}: bogus: unknown key")


class TestPathsAndDefaults:
    def test_state_dir_is_relative_to_the_config_file(self, tmp_path: Path) -> None:
        """A relative state_dir is resolved against the config file's directory, others under it."""
        data = config_data(("global", "shared"), (), state_dir="state")
        path = write_toml(tmp_path / "config.toml", data)
        config = load_config(path, environ={})
        assert config.state_dir == tmp_path / "state"
        assert config.slot.lock_path == tmp_path / "state" / "slot.lock"

    def test_systemd_state_directory_is_used_when_state_dir_is_absent(self) -> None:
        config = parse_config(config_data(), environ={"STATE_DIRECTORY": "/var/lib/dreamer"})
        assert config.state_dir == Path("/var/lib/dreamer")

    def test_default_config_path_precedence(self) -> None:
        """$DREAMER_CONFIG wins, then $CONFIGURATION_DIRECTORY/config.toml, then /etc."""
        assert default_config_path({"DREAMER_CONFIG": "/x.toml", "CONFIGURATION_DIRECTORY": "/c"}) == Path(
            "/x.toml"
        )
        assert default_config_path({"CONFIGURATION_DIRECTORY": "/etc/dreamer"}) == Path(
            "/etc/dreamer/config.toml"
        )
        assert default_config_path({}) == Path("/etc/dreamer/config.toml")

    def test_example_config_is_valid(self) -> None:
        """The shipped config.example.toml loads without error."""
        example = Path(__file__).resolve().parents[2] / "config.example.toml"
        config = load_config(example, environ={})
        assert sorted(config.enabled_profiles()) == ["coder", "homelab", "research"]


class TestBounds:
    """Numbers that pass check-config never break the daemon: each has a finite, sane maximum."""

    @pytest.mark.parametrize(
        ("table", "key", "value"),
        [
            ("schedule", "interval_minutes", float("inf")),
            ("schedule", "interval_minutes", float("nan")),
            ("schedule", "interval_minutes", 7 * 24 * 60 + 1),
            ("schedule", "first_run_delay_s", 1e300),
            ("schedule", "job_timeout_s", 86401),
            ("schedule", "misfire_grace_s", 10**12),
            ("schedule", "drain_timeout_s", 3601),
            ("retry", "max_delay_s", float("inf")),
            ("retry", "retry_after_cap_s", 1e300),
            ("rollup", "watermark_overlap_s", 1e300),
            ("slot", "acquire_timeout_s", float("inf")),
            ("audit", "check_every_minutes", 1e300),
        ],
    )
    def test_out_of_bounds_is_refused_by_key(self, table: str, key: str, value: float) -> None:
        (line,) = problems(lambda d: section(d, table).update({key: value}))
        assert line.startswith(f"{SOURCE}: {table}.{key}: ")

    def test_jitter_longer_than_the_interval_is_refused(self) -> None:
        """A jitter past the interval would leave the daemon pinging the watchdog and never running."""
        (line,) = problems(lambda d: section(d, "schedule").update(interval_minutes=60, jitter_s=10**9))
        assert line.startswith(f"{SOURCE}: schedule.jitter_s: ")
        (line,) = problems(lambda d: section(d, "schedule").update(interval_minutes=1, jitter_s=61))
        assert line == f"{SOURCE}: schedule.jitter_s: 61 s is longer than the interval (60 s)"

    def test_the_largest_allowed_values_load(self) -> None:
        config = config_with(
            lambda d: section(d, "schedule").update(
                interval_minutes=7 * 24 * 60, jitter_s=7 * 24 * 3600, first_run_delay_s=86400
            )
        )
        assert config.schedule.interval_minutes == 7 * 24 * 60
