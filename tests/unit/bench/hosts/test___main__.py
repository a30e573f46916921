"""The hosts benchmark's command: its sizes, its refusals, its verdict on the log."""

from __future__ import annotations

import pytest

from bench.hosts.__main__ import FULL, QUICK, main, parse_args, violations
from bench.hosts.run import GLOBAL_BANK, bank_for, banks_round_robin, profile_names
from bench.postgres import DSN_ENV


class TestCommand:
    def test_sizes_come_from_quick_unless_given(self) -> None:
        """Unset sizes are left to --quick or the full run; given ones are kept."""
        args = parse_args(["--quick", "--hosts", "5"])
        assert args.quick and args.hosts == 5 and args.profiles is None
        assert QUICK["profiles"] < FULL["profiles"] == 10_000 and FULL["hosts"] == 4 and FULL["ttl"] == 3.0
        assert parse_args([]).backend == "sqlite"

    def test_postgres_without_a_dsn_exits_2_naming_the_variable(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.delenv(DSN_ENV, raising=False)
        assert main(["--backend", "postgres", "--quick"]) == 2
        assert DSN_ENV in capsys.readouterr().err

    def test_a_dsn_with_a_password_is_refused_without_echoing_it(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The state configuration refuses the password; the benchmark says so and never prints it."""
        monkeypatch.delenv(DSN_ENV, raising=False)
        assert main(["--backend", "postgres", "--dsn", "postgresql://u:s3cr3tpw@127.0.0.1:1/x"]) == 2
        err = capsys.readouterr().err
        assert "password" in err and "s3cr3tpw" not in err

    def test_a_server_elsewhere_is_refused(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Benchmarks talk only to this machine: a remote --dsn exits 2 before any connection."""
        assert main(["--backend", "postgres", "--quick", "--dsn", "postgresql://u@db.example:5432/x"]) == 2
        assert "127.0.0.1" in capsys.readouterr().err

    def test_too_few_hosts(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--quick", "--hosts", "1"]) == 2
        assert "--hosts" in capsys.readouterr().err

    def test_violations_name_what_the_leases_promise(self) -> None:
        ok = {"safety": {"duplicates": 0, "tokens_ok": True}}
        assert violations(ok) == []
        bad = {"safety": {"duplicates": 2, "tokens_ok": False}}
        assert violations(bad) == ["2 duplicate runs", "lease tokens not raised by a takeover"]


class TestBanks:
    def test_a_bank_per_hundred_profiles_in_order_or_one(self) -> None:
        names = profile_names(250)
        assert names[0] == "p00000" and names[-1] == "p00249"
        per_100 = bank_for(100)
        assert [per_100(n) for n in ("p00000", "p00099", "p00100", "p00249")] == [
            "up0000", "up0000", "up0001", "up0002"
        ]
        assert bank_for(0)("p00123") == GLOBAL_BANK
        assert banks_round_robin(3)("g00004") == "up0001"
