"""The deterministic LLM stub (tests/llmstub) run in this process on a free port of 127.0.0.1:
a real server over real sockets, driven with the same controls the Hindsight tests use."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.hindsight_fixtures import LLMStub
from tests.llmstub.server import make_server

__all__ = ["running_stub", "stub", "stub_controls", "stub_url"]


@contextmanager
def running_stub() -> Iterator[str]:
    """A stub serving until the block ends; yields its base URL."""
    server = make_server(0, None)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def stub_controls(url: str) -> Iterator[LLMStub]:
    """The stub's controls; every fault and script armed through them is disarmed afterwards."""
    with httpx.Client(timeout=10.0) as client:
        controls = LLMStub(url, client)
        try:
            yield controls
        finally:
            controls.clear()


@pytest.fixture(scope="module")
def stub_url() -> Iterator[str]:
    """One stub for the test module (a fixture of tests/conftest.py)."""
    with running_stub() as url:
        yield url


@pytest.fixture
def stub(stub_url: str) -> Iterator[LLMStub]:
    """The module's stub's controls, disarmed after the test."""
    with stub_controls(stub_url) as controls:
        yield controls
