"""The test server's API key never leaks: pytest hooks that search every test's captured output and
log records, and every file the tests leave under pytest's temp directory (daemon logs, reports),
for the key and for any 8-character piece of it.

CI runs the server with a random key of letters of both cases, digits, ``-`` and ``_``
(``.ci/run``), so a piece does not occur by chance. A piece made only of lowercase hex digits and
dashes is no evidence: ids (UUIDs, run ids) are made of those, and one such window of a hex key
matched a unit id by chance (about one suite run in a hundred), so such pieces are not searched.
With the default development key ``dreamer-test-key`` (which bank names such as
``dreamer-test-...`` share) the check is off.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PIECE = 8
DEVELOPMENT_KEY = "dreamer-test-key"
#: What an id is made of: a piece of the key spelled only so could be part of any id.
_ID_LIKE = re.compile(r"[0-9a-f-]+")


def key_pieces(key: str | None = None) -> frozenset[str]:
    """Every 8-character piece of ``key`` (the test server's by default); none for a short key or
    the development one."""
    key = os.environ.get("DREAMER_TEST_HINDSIGHT_API_KEY", "") if key is None else key
    if len(key) < 12 or key == DEVELOPMENT_KEY:
        return frozenset()
    windows = (key[i : i + PIECE] for i in range(len(key) - PIECE + 1))
    return frozenset(piece for piece in windows if not _ID_LIKE.fullmatch(piece))


def leaked_pieces(text: str, pieces: frozenset[str]) -> list[str]:
    return sorted(p for p in pieces if p in text)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    pieces = key_pieces()
    if not pieces or not report.passed:
        return
    captured = "\n".join(content for _name, content in report.sections)
    leaked = leaked_pieces(captured, pieces)
    if leaked:
        report.outcome = "failed"
        report.longrepr = f"the test server's API key leaked into the captured output ({len(leaked)} pieces)"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    pieces = key_pieces()
    factory = getattr(session.config, "_tmp_path_factory", None)
    if not pieces or factory is None:
        return
    leaks = [
        str(path)
        for path in Path(factory.getbasetemp()).rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and path.stat().st_size < 50_000_000
        and leaked_pieces(path.read_bytes().decode("utf-8", "replace"), pieces)
    ]
    if leaks:
        print(f"\nthe test server's API key leaked into {len(leaks)} files, e.g. {leaks[:3]}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
