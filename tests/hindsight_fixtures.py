"""Pytest fixtures for tests against the real Hindsight test server started by ``scripts/hindsight-dev up``.

The server is found through the environment that ``scripts/hindsight-dev up`` prints (and writes to
``$DREAMER_HINDSIGHT_HOME/env``): ``DREAMER_TEST_HINDSIGHT_URL``, ``DREAMER_TEST_HINDSIGHT_API_KEY``,
``DREAMER_TEST_LLM_STUB_URL`` and ``DREAMER_TEST_HINDSIGHT_ADMISSION_URL``. Every fixture skips the test
when its variable is missing.

Several test sessions may share one server, so a test confines what it does to others: its banks come
from ``fresh_bank_id``, its faults carry a ``match`` marker that only its own content contains (see
:meth:`LLMStub.fault`), and ``llm_stub`` disarms only the faults armed through it. Provoking a 503 goes
to the admission server (``hindsight_admission_url``), never to the main one.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

HINDSIGHT_URL_VAR = "DREAMER_TEST_HINDSIGHT_URL"
HINDSIGHT_API_KEY_VAR = "DREAMER_TEST_HINDSIGHT_API_KEY"
LLM_STUB_URL_VAR = "DREAMER_TEST_LLM_STUB_URL"
HINDSIGHT_ADMISSION_URL_VAR = "DREAMER_TEST_HINDSIGHT_ADMISSION_URL"
_HOW_TO_START = (
    "start the test server with `scripts/hindsight-dev up`, then load its environment: "
    'set -a; . "${DREAMER_HINDSIGHT_HOME:-.hindsight-dev}/env"; set +a'
)


def required_env(name: str) -> str:
    """The value of ``name``, or skip the calling test with instructions when it is not set."""
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.skip(f"{name} is not set: {_HOW_TO_START}")
    return value


class LLMStubError(RuntimeError):
    """The LLM stub refused a control request; the message carries its explanation."""


class LLMStub:
    """Test controls of the deterministic LLM stub behind the Hindsight test server."""

    def __init__(self, base_url: str, client: httpx.Client) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client
        self.owner = f"owner-{uuid.uuid4().hex}"

    def _post(self, path: str, payload: dict[str, Any] | None = None) -> None:
        response = self._client.post(f"{self.base_url}{path}", json=payload or {})
        if response.status_code != 200:
            raise LLMStubError(f"POST {path} -> {response.status_code}: {response.text}")

    def fault(
        self,
        kind: str = "chat",
        status: int | None = 500,
        *,
        retry_after: str | None = None,
        count: int = -1,
        delay_s: float = 0.0,
        match: str | None = None,
    ) -> None:
        """Arm a fault.

        ``kind``: ``chat``, ``embeddings``, ``all`` or one request kind (``extract``, ``consolidate``,
        ``reflect``, ``structured``, ``other``). Matching requests wait ``delay_s`` and are then answered
        with ``status`` (with a ``Retry-After`` header when ``retry_after`` is given), or normally when
        ``status`` is None. ``count`` requests are affected; -1 means until :meth:`clear`. With ``match``
        (letters, digits and hyphens, e.g. the test's bank id written into its content) only requests
        whose body contains it are affected; without it, every session using the server is.
        """
        fault = {"kind": kind, "status": status, "retry_after": retry_after, "count": count}
        self._post("/control/fault", {**fault, "delay_s": delay_s, "match": match, "owner": self.owner})

    def script(
        self,
        *,
        match: str,
        content: str,
        finish_reason: str = "stop",
        kind: str = "all",
        count: int = -1,
    ) -> None:
        """Script the "model": chat requests whose body contains ``match`` get ``content`` verbatim as
        the assistant's answer, with ``finish_reason`` (``stop``, or ``length`` for an answer cut at
        max_tokens), and the usual approximate ``usage``.

        ``match`` is required (the test's marker, e.g. its bank id, or a unit id only its prompt
        holds). ``kind``: ``all`` chat requests, or one kind (``structured``, ``reflect``, ``other``
        (Dreamer's own LLM calls), ``extract``, ``consolidate``). ``count`` requests are answered so;
        -1 means until :meth:`clear`. A fault with a status armed for the same request answers
        instead; a delay-only fault (such as :meth:`MarkedRequests.tag`) only delays the answer.
        The request log marks a scripted answer with ``scripted`` (the match) and ``detail``
        ``scripted:<finish_reason>``.
        """
        script = {"match": match, "content": content, "finish_reason": finish_reason, "kind": kind}
        self._post("/control/script", {**script, "count": count, "owner": self.owner})

    def clear(self) -> None:
        """Disarm the faults and scripts armed through this helper (other test runs' stay)."""
        self._post("/control/clear", {"owner": self.owner})

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        """Logged requests with ``seq`` above ``since``, oldest first: ``seq, ts, kind`` (extract,
        consolidate, reflect, structured, other, embeddings), ``path, status`` (None while in flight),
        ``fault, delay_s, match`` (of the fault applied), ``scripted`` (the match of the script that
        answered, else None), ``detail`` (for reflect, the tool called; ``scripted:<finish_reason>``
        for a scripted answer)."""
        response = self._client.get(f"{self.base_url}/control/requests")
        response.raise_for_status()
        entries: list[dict[str, Any]] = response.json()["requests"]
        return [e for e in entries if e["seq"] > since]

    def last_seq(self) -> int:
        """The ``seq`` of the newest logged request (0 when none): pass it to :meth:`requests` later."""
        entries = self.requests()
        return entries[-1]["seq"] if entries else 0

    def reset_log(self) -> None:
        """Forget answered requests, everyone's: prefer ``requests(since=...)`` on a shared server."""
        self._post("/control/reset-log")


@pytest.fixture
def hindsight_url() -> str:
    """Base URL of the Hindsight test server, e.g. ``http://127.0.0.1:PORT``."""
    return required_env(HINDSIGHT_URL_VAR).rstrip("/")


@pytest.fixture
def hindsight_api_key() -> str:
    """The API key the Hindsight test server requires (``Authorization: Bearer <key>``)."""
    return required_env(HINDSIGHT_API_KEY_VAR)


@pytest.fixture
def hindsight_admission_url() -> str:
    """Base URL of the admission server: same database and key, one sync retain at a time, 1 s queue."""
    return required_env(HINDSIGHT_ADMISSION_URL_VAR).rstrip("/")


@pytest.fixture
def llm_stub() -> Iterator[LLMStub]:
    """Controls of the LLM stub; the faults and scripts armed through it are disarmed when the test
    ends."""
    with httpx.Client(timeout=10.0) as client:
        stub = LLMStub(required_env(LLM_STUB_URL_VAR), client)
        try:
            yield stub
        finally:
            stub.clear()


@pytest.fixture
def fresh_bank_id(request: pytest.FixtureRequest, hindsight_url: str) -> str:
    """A bank id no other test uses: the test's name plus a random suffix (Hindsight creates it on retain)."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    return f"dreamer-test-{name}-{uuid.uuid4().hex[:12]}"


#: The delay of the tagging fault (see :class:`MarkedRequests`): long enough to count as a fault,
#: too short to matter.
TAG_DELAY_S = 0.001


class MarkedRequests:
    """The LLM stub's log, narrowed to the requests whose body carries this test's marker.

    The stub's log keeps no bodies, but it records the ``match`` of the fault applied to each request.
    A delay-only fault of a millisecond with ``match=marker`` therefore tags every request of this test
    without changing its answer. The stub applies the first armed fault that matches, so a failure
    fault must be armed before :meth:`tag`.
    """

    def __init__(self, stub: LLMStub, marker: str) -> None:
        self.stub = stub
        self.marker = marker

    def tag(self) -> None:
        self.stub.fault(kind="chat", status=None, delay_s=TAG_DELAY_S, match=self.marker)

    def last_seq(self) -> int:
        return self.stub.last_seq()

    def since(self, seq: int) -> list[dict[str, Any]]:
        return [r for r in self.stub.requests(seq) if r["match"] == self.marker]

    def summarising_since(self, seq: int) -> list[dict[str, Any]]:
        """The reflect turns and structured-output requests (the LLM side of a reflect) after ``seq``."""
        return [r for r in self.since(seq) if r["kind"] in ("reflect", "structured")]


@pytest.fixture
def server(hindsight_url: str, hindsight_api_key: str) -> str:
    """The test server's URL; the configurations read its API key from the environment by name."""
    return hindsight_url


@pytest.fixture
def marked(llm_stub: LLMStub, fresh_bank_id: str) -> MarkedRequests:
    """The stub's requests about this test's banks and content (tagging disarmed when the test ends)."""
    return MarkedRequests(llm_stub, fresh_bank_id)
