"""Reads across banks through the router, on the embedded store (real SQLite) and on a real Hindsight.

What is pinned: every hit is labelled with its bank alias; duplicates across banks fold (same
document id, or the same normalised text) keeping every label; a bank that fails leaves the others'
answer intact and is reported missing with its reason; every policy refusal happens before any
request reaches the backend.

Two test doubles wrap the real backend in a :class:`~dreamer.backends.forwarding.ForwardingBackend`
and override only the calls they intercept:

- ``FaultInjectingBackend`` is a fault injection wrapper: its recall and reflect raise
  :class:`~dreamer.errors.TransientBackendError` (or never return) for chosen bank ids, the way a
  server that times out or answers 503 for one bank would;
- ``RecordingBackend`` records every call, to prove that a refused operation sent nothing.

The Hindsight cases need ``DREAMER_TEST_HINDSIGHT_URL`` (and ``DREAMER_TEST_HINDSIGHT_API_KEY``);
``scripts/hindsight-dev up`` starts one and prints both. Its test LLM keeps texts verbatim, so the
same assertions hold there; each test uses fresh bank ids, since a real server never forgets a bank.
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from pydantic import SecretStr

from dreamer.backends.base import MemoryBackend, RecallItem, ReflectResult, RetainItem, RetainResult
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.forwarding import ForwardingBackend
from dreamer.config import Config
from dreamer.errors import PolicyError, TransientBackendError
from dreamer.readside.answers import RecallAnswer
from dreamer.readside.router import BankRouter
from dreamer.readside.tools import HINDSIGHT_TOOLS, MEMORY_TOOLS, run_tool_call
from dreamer.retry import RetryPolicy, call_with_retry
from tests.support.configs import config_data, default_bank_id, parsed

HINDSIGHT_URL_ENV = "DREAMER_TEST_HINDSIGHT_URL"
HINDSIGHT_KEY_ENV = "DREAMER_TEST_HINDSIGHT_API_KEY"
#: The shared test server admits one retain at a time and may answer 503 + Retry-After; retry like
#: the daemon does, so only the faults a test injects make a bank fail.
SHARED_SERVER_RETRY = RetryPolicy(max_attempts=30, base_delay_s=0.5, max_delay_s=5.0, retry_after_cap_s=5.0)

_T = TypeVar("_T")


# --- backend wrappers ---------------------------------------------------------------------------


class RetryingBackend(ForwardingBackend):
    """Retries transient answers of a shared test server (503 at capacity), as the daemon would."""

    async def _retry(self, operation: str, call: Callable[[], Awaitable[_T]]) -> _T:
        return await call_with_retry(operation, call, SHARED_SERVER_RETRY)

    async def recall(self, bank_id: str, query: str, **kwargs: Any) -> list[RecallItem]:
        return await self._retry("recall", lambda: self.inner.recall(bank_id, query, **kwargs))

    async def reflect(self, bank_id: str, query: str, **kwargs: Any) -> ReflectResult:
        return await self._retry("reflect", lambda: self.inner.reflect(bank_id, query, **kwargs))

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        return await self._retry("retain", lambda: self.inner.retain(bank_id, items))


class RecordingBackend(ForwardingBackend):
    """Records ``(operation, bank_id)`` of every call before forwarding it."""

    def __init__(self, inner: MemoryBackend) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, str]] = []

    async def recall(self, bank_id: str, query: str, **kwargs: Any) -> list[RecallItem]:
        self.calls.append(("recall", bank_id))
        return await super().recall(bank_id, query, **kwargs)

    async def reflect(self, bank_id: str, query: str, **kwargs: Any) -> ReflectResult:
        self.calls.append(("reflect", bank_id))
        return await super().reflect(bank_id, query, **kwargs)

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        self.calls.append(("retain", bank_id))
        return await super().retain(bank_id, items)


class FaultInjectingBackend(ForwardingBackend):
    """Fault injection wrapper: recall/reflect on ``down`` bank ids fail; on ``hang`` ones never return."""

    def __init__(
        self, inner: MemoryBackend, *, down: Mapping[str, str] | None = None, hang: Sequence[str] = ()
    ) -> None:
        super().__init__(inner)
        self.down = dict(down or {})
        self.hang = set(hang)

    async def _fault(self, operation: str, bank_id: str) -> None:
        if bank_id in self.hang:
            await anyio.sleep_forever()
        if bank_id in self.down:
            raise TransientBackendError(self.down[bank_id], status=None, operation=operation)

    async def recall(self, bank_id: str, query: str, **kwargs: Any) -> list[RecallItem]:
        await self._fault("recall", bank_id)
        return await super().recall(bank_id, query, **kwargs)

    async def reflect(self, bank_id: str, query: str, **kwargs: Any) -> ReflectResult:
        await self._fault("reflect", bank_id)
        return await super().reflect(bank_id, query, **kwargs)


class InFlightProbe(ForwardingBackend):
    """Counts recalls running at the same time (each yields to the event loop before forwarding)."""

    def __init__(self, inner: MemoryBackend) -> None:
        super().__init__(inner)
        self.running = 0
        self.most_running = 0

    async def recall(self, bank_id: str, query: str, **kwargs: Any) -> list[RecallItem]:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            for _ in range(3):
                await anyio.sleep(0)
            return await super().recall(bank_id, query, **kwargs)
        finally:
            self.running -= 1


# --- the world a test runs in -------------------------------------------------------------------


@dataclass
class World:
    """A configuration with fresh bank ids, and a backend seen through the test's wrappers."""

    kind: str
    config: Config
    backend: MemoryBackend
    opened: list[MemoryBackend] = field(default_factory=list)

    def bank_id(self, alias: str) -> str:
        return self.config.bank_id(alias)

    async def seed(self, alias: str, items: Sequence[RetainItem]) -> None:
        """Write straight into a bank (global and shared are not writable through the router)."""
        await self.backend.retain(self.bank_id(alias), items)

    def router(
        self,
        backend: MemoryBackend | None = None,
        *,
        profile: str | None = "research",
        bank_timeout_s: float | None = None,
    ) -> BankRouter:
        return BankRouter(
            self.config, backend or self.backend, profile=profile, bank_timeout_s=bank_timeout_s
        )


def make_config(tmp_path: Path, suffix: str, *, allow_raw_bank_ids: bool = False) -> Config:
    writable = {"access": "read_write"}
    data = config_data(
        {
            "global": writable,
            "shared": {"description": "Cross-agent knowledge."},
            "research": writable,
            "coder": writable,
            "ops": {"description": "Deployment and host quirks."},
            "archive": {**writable, "enabled": False},
        },
        ("research", "coder"),
        bank_id=lambda alias: f"{default_bank_id(alias)}-{suffix}",
        state_dir=str(tmp_path / "state"),
        topology={"allow_raw_bank_ids": allow_raw_bank_ids},
    )
    return parsed(data, base_dir=tmp_path)


def open_backend(kind: str, config: Config) -> MemoryBackend:
    if kind == "embedded":
        return EmbeddedBackend(config.embedded_path)
    url = os.environ.get(HINDSIGHT_URL_ENV)
    if not url:
        pytest.skip(
            f"{HINDSIGHT_URL_ENV} is not set: start a server with `scripts/hindsight-dev up` "
            "and export the variables it prints"
        )
    key = os.environ.get(HINDSIGHT_KEY_ENV)
    # Imported here: the embedded cases must not depend on the HTTP client.
    hindsight = importlib.import_module("dreamer.backends.hindsight.backend")
    settings = config.backend.hindsight.model_copy(
        update={
            "url": url.rstrip("/"),
            "api_key": SecretStr(key) if key else None,
            "read_timeout_s": 120.0,
            "reflect_timeout_s": 300.0,
        }
    )
    backend: MemoryBackend = hindsight.HindsightBackend(settings)
    return RetryingBackend(backend)


@pytest.fixture(
    params=["embedded", pytest.param("hindsight", marks=[pytest.mark.hindsight, pytest.mark.slow])]
)
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    config = make_config(tmp_path, uuid.uuid4().hex[:12])
    backend = open_backend(request.param, config)
    made = World(request.param, config, backend, [backend])
    try:
        yield made
    finally:
        for opened in made.opened:
            await opened.aclose()


def token() -> str:
    """A word that occurs nowhere else, so a query finds only what this test wrote."""
    return "zq" + uuid.uuid4().hex[:10]


def labelled(answer: RecallAnswer, word: str) -> dict[str, tuple[str, ...]]:
    """Text of every hit mentioning ``word`` -> its labels."""
    return {item.text: item.labels for item in answer.items if word in item.text}


# --- read-union ---------------------------------------------------------------------------------


class TestReadUnion:
    async def test_each_hit_is_labelled_with_its_bank(self, world: World) -> None:
        """A profile's read-union queries own bank, global and shared, and labels each hit by alias."""
        word = token()
        own = f"The {word} cluster schedules jobs with slurm."
        rolled = f"The {word} team prefers written design reviews."
        shared = f"The {word} wiki lives on the intranet host."
        await world.seed("research", [RetainItem(content=own)])
        await world.seed("global", [RetainItem(content=rolled)])
        await world.seed("shared", [RetainItem(content=shared)])
        await world.seed("ops", [RetainItem(content=f"The {word} ops bank is outside the union.")])

        answer = await world.router().read_union(word)

        assert answer.banks == ("research", "global", "shared")
        assert answer.complete
        hits = labelled(answer, word)
        assert hits[own] == ("research",)
        assert hits[rolled] == ("global",)
        assert hits[shared] == ("shared",)
        assert all("ops bank" not in text for text in hits)
        assert f"[research] {own}" in answer.render().splitlines()

    async def test_banks_are_queried_concurrently(self, world: World) -> None:
        """All banks of the union are in flight at once, not one after another."""
        probe = InFlightProbe(world.backend)
        answer = await world.router(probe).read_union(token())
        assert answer.complete
        assert probe.most_running == 3

    async def test_same_text_in_two_banks_folds_into_one_hit_with_both_labels(self, world: World) -> None:
        """Identical normalised text in two banks is one hit labelled with both, in union order."""
        word = token()
        await world.seed("shared", [RetainItem(content=f"Production {word} deploys run behind nginx.")])
        await world.seed("research", [RetainItem(content=f"production {word} deploys run behind NGINX!")])

        answer = await world.router().read_union(word)

        hits = [item for item in answer.items if word in item.text]
        assert len(hits) == 1
        assert hits[0].labels == ("research", "shared")
        assert {world.bank_id("research"), world.bank_id("shared")} <= set(hits[0].bank_ids)
        assert answer.render().startswith("[research,shared] ")

    async def test_same_document_id_in_three_banks_hides_no_fact(self, world: World) -> None:
        """Three different texts under one document id in three banks are three labelled hits."""
        word = token()
        texts = {
            "research": f"The {word} paper is under review.",
            "global": f"The {word} paper was accepted at a venue.",
            "shared": f"The {word} paper was withdrawn by its authors.",
        }
        for alias, text in texts.items():
            await world.seed(alias, [RetainItem(content=text, document_id="memo-7")])

        answer = await world.router().read_union(word)

        hits = [item for item in answer.items if word in item.text]
        assert sorted(h.labels for h in hits) == [("global",), ("research",), ("shared",)]
        assert {h.document_id for h in hits} == {"memo-7"}

    async def test_different_documents_stay_apart(self, world: World) -> None:
        """Different texts under different document ids are separate hits, each with its own label."""
        word = token()
        await world.seed("research", [RetainItem(content=f"The {word} lab uses GPUs.", document_id="a")])
        await world.seed("global", [RetainItem(content=f"The {word} office closes at six.", document_id="b")])

        answer = await world.router().read_union(word)

        assert sorted(labelled(answer, word).values()) == [("global",), ("research",)]

    async def test_one_bank_down_leaves_the_others(self, world: World) -> None:
        """A failing bank is reported missing with its reason; the other banks still answer."""
        word = token()
        await world.seed("research", [RetainItem(content=f"The {word} notes are in the research bank.")])
        await world.seed("global", [RetainItem(content=f"The {word} card is in the global bank.")])
        faulty = FaultInjectingBackend(
            world.backend,
            down={world.bank_id("shared"): "Hindsight recall timed out (ReadTimeout; read 60.0s)"},
        )

        answer = await world.router(faulty).read_union(word)

        assert not answer.complete
        assert [(m.alias, m.reason) for m in answer.missing] == [("shared", "timeout")]
        assert sorted(labelled(answer, word).values()) == [("global",), ("research",)]
        assert answer.render().splitlines()[-1] == "(missing: shared — timeout)"
        assert answer.to_json()["missing"][0]["bank_id"] == world.bank_id("shared")

    async def test_a_bank_past_its_deadline_is_missing(self, world: World) -> None:
        """A bank that never answers is cut off by the per-bank deadline and reported as a timeout."""
        word = token()
        await world.seed("research", [RetainItem(content=f"The {word} answer arrives.")])
        hanging = FaultInjectingBackend(world.backend, hang=[world.bank_id("global")])
        # A first recall warms the server (embedding model, caches), so the deadline below measures
        # only the hanging bank and a slow first answer cannot make research miss it too.
        await world.router().recall(word, banks=["research"])

        answer = await world.router(hanging, bank_timeout_s=8.0).read_union(word)

        assert [(m.alias, m.reason) for m in answer.missing] == [("global", "timeout")]
        assert list(labelled(answer, word).values()) == [("research",)]

    async def test_every_bank_down_is_an_answer_not_an_error(self, world: World) -> None:
        """With every bank failing the answer is empty and names each missing bank, in union order."""
        down = {world.bank_id(a): "HTTP 503 at capacity" for a in ("research", "global", "shared")}
        answer = await world.router(FaultInjectingBackend(world.backend, down=down)).read_union("x")
        assert answer.items == ()
        assert [m.alias for m in answer.missing] == ["research", "global", "shared"]


class TestExplicitBanks:
    async def test_recall_from_named_banks(self, world: World) -> None:
        """recall(banks=[...]) reads exactly those banks, in that order, with their labels."""
        word = token()
        await world.seed("ops", [RetainItem(content=f"The {word} service restarts through systemd.")])
        await world.seed("coder", [RetainItem(content=f"The {word} repository tests with pytest.")])
        await world.seed("research", [RetainItem(content=f"The {word} research is elsewhere.")])

        answer = await world.router(profile=None).recall(word, banks=["coder", "ops"])

        assert answer.banks == ("coder", "ops")
        assert sorted(labelled(answer, word).values()) == [("coder",), ("ops",)]

    async def test_reflect_each_labels_answers_and_isolates_failures(self, world: World) -> None:
        """One reflect per bank, labelled in the order asked; a failing bank is listed as missing."""
        word = token()
        await world.seed("ops", [RetainItem(content=f"The {word} proxy is nginx on the app host.")])
        faulty = FaultInjectingBackend(world.backend, down={world.bank_id("shared"): "HTTP 503"})

        answer = await world.router(faulty).reflect_each(f"What is the {word} proxy?", ["ops", "shared"])

        assert [a.label for a in answer.answers] == ["ops"]
        assert word in answer.answers[0].text
        assert [(m.alias, m.reason) for m in answer.missing] == [("shared", "unavailable")]
        rendered = answer.render()
        assert rendered.startswith("[ops] ")
        assert rendered.splitlines()[-1] == "(missing: shared — unavailable)"

    async def test_retain_then_read_union_finds_it_under_the_own_label(self, world: World) -> None:
        """A retain without a bank goes to the profile's own bank and reads back labelled with it."""
        word = token()
        result = await world.router().retain(f"The {word} benchmark needs 16 GB of RAM.", context="note")
        assert (result.alias, result.bank_id) == ("research", world.bank_id("research"))
        answer = await world.router().read_union(word)
        assert list(labelled(answer, word).values()) == [("research",)]


class TestToolCalls:
    async def test_recall_without_a_bank_reads_the_union(self, world: World) -> None:
        """memory_recall with bank and banks null reads the profile's read-union."""
        word = token()
        await world.seed("global", [RetainItem(content=f"The {word} card sits in the global bank.")])
        answer = await run_tool_call(
            world.router(), "memory_recall", {"query": word, "bank": None, "banks": None}
        )
        assert isinstance(answer, RecallAnswer)
        assert answer.banks == ("research", "global", "shared")
        assert list(labelled(answer, word).values()) == [("global",)]

    async def test_retain_tool_refuses_the_global_bank_before_sending(self, world: World) -> None:
        """memory_retain into the global roll-up bank is a PolicyError and sends nothing."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError, match="only through the roll-up"):
            await run_tool_call(world.router(recorder), "memory_retain", {"content": "x", "bank": "global"})
        assert recorder.calls == []

    @pytest.mark.parametrize("tools", [MEMORY_TOOLS, HINDSIGHT_TOOLS])
    async def test_retain_tool_refuses_banks_and_unknown_arguments(self, world: World, tools: Any) -> None:
        """A retain naming ``banks`` (or a misspelt key) is refused and sends nothing: it would have
        been stored in the default bank while the caller meant another."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError, match="give bank, not banks"):
            await run_tool_call(
                world.router(recorder), tools.retain, {"content": "x", "banks": ["code"]}, tools
            )
        with pytest.raises(PolicyError, match="unknown argument 'bnak'"):
            await run_tool_call(world.router(recorder), tools.retain, {"content": "x", "bnak": "code"}, tools)
        assert recorder.calls == []


# --- policy: refused before anything is sent ----------------------------------------------------


class TestRefusalsSendNothing:
    async def test_unknown_alias(self, world: World) -> None:
        """An unknown alias is refused with the known aliases listed, and nothing is sent."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError) as caught:
            await world.router(recorder).recall("q", banks=["research", "invented"])
        message = str(caught.value)
        assert "unknown bank 'invented'" in message
        assert "global, shared, research, coder, ops" in message
        assert recorder.calls == []

    async def test_disabled_bank(self, world: World) -> None:
        """A disabled bank is invisible: unknown, not listed among the known ones, nothing sent."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError) as caught:
            await world.router(recorder).reflect_each("q", ["archive"])
        assert "unknown bank 'archive'" in str(caught.value)
        assert "archive" not in str(caught.value).split("known:")[1]
        assert recorder.calls == []

    async def test_retain_to_read_only_bank(self, world: World) -> None:
        """Retain to a read-only bank names its access setting and the writable banks; nothing sent."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError) as caught:
            await world.router(recorder).retain("x", bank="ops")
        assert 'read-only (banks.ops.access = "read_only")' in str(caught.value)
        assert "retain to one of research" in str(caught.value)
        assert recorder.calls == []

    async def test_retain_to_global_even_when_read_write(self, world: World) -> None:
        """The global bank is configured read_write here, and retain is still refused."""
        assert world.config.banks["global"].access == "read_write"
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError, match="cards arrive there only through the roll-up"):
            await world.router(recorder, profile=None).retain("x", bank="global")
        assert recorder.calls == []

    async def test_raw_bank_id_when_not_allowed(self, world: World) -> None:
        """A raw bank id is refused without allow_raw_bank_ids, pointing at the alias; nothing sent."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError) as caught:
            await world.router(recorder).recall("q", banks=[world.bank_id("ops")])
        assert "use the alias" in str(caught.value) and "'ops'" in str(caught.value)
        with pytest.raises(PolicyError, match="unknown bank 'elsewhere'"):
            await world.router(recorder).recall("q", banks=["elsewhere"])
        assert recorder.calls == []

    async def test_one_bad_name_refuses_the_whole_read(self, world: World) -> None:
        """A multi-bank read with one refused name sends no request at all, not even to valid banks."""
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError):
            await world.router(recorder).reflect_each("q", ["ops", "shared", "nope"])
        assert recorder.calls == []


class TestRawBankIds:
    async def test_raw_ids_are_readable_when_allowed(self, world: World, tmp_path: Path) -> None:
        """With raw ids allowed, a raw id is read and labelled as itself; a configured id gets its alias."""
        config = make_config(tmp_path, world.bank_id("ops").rsplit("-", 1)[1], allow_raw_bank_ids=True)
        word = token()
        raw = f"scratch-{uuid.uuid4().hex[:12]}"
        await world.backend.retain(raw, [RetainItem(content=f"The {word} scratch note.")])
        await world.seed("ops", [RetainItem(content=f"The {word} ops note.")])
        router = BankRouter(config, world.backend)

        answer = await router.recall(word, banks=[raw, config.bank_id("ops")])

        assert answer.banks == (raw, "ops")
        assert sorted(labelled(answer, word).values()) == [("ops",), (raw,)]
        recorder = RecordingBackend(world.backend)
        with pytest.raises(PolicyError, match=r"raw bank id .* is read-only"):
            await BankRouter(config, recorder).retain("x", bank=raw)
        assert recorder.calls == []
