"""Failures of a real Hindsight server, as the backend reports them.

Faults are injected where they really happen: the LLM stub behind Hindsight answers 500 (Hindsight
then fails the sync retain with its own 500), the server's API-key check rejects a wrong key, and
admission control turns a second concurrent retain away with 503 + Retry-After. Needs
``DREAMER_TEST_HINDSIGHT_URL``, ``DREAMER_TEST_HINDSIGHT_API_KEY``, ``DREAMER_TEST_LLM_STUB_URL`` and
``DREAMER_TEST_HINDSIGHT_ADMISSION_URL`` (printed by ``scripts/hindsight-dev up``); the fixtures come
from ``tests/hindsight_fixtures.py``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from dreamer.backends.base import RetainItem
from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.config import HindsightBackendConfig
from dreamer.errors import PermanentBackendError, TransientBackendError
from dreamer.retry import RetryPolicy, call_with_retry
from tests import hindsight_fixtures
from tests.hindsight_fixtures import LLMStub

# The shared fixtures, bound here so this module runs whether or not a conftest provides them.
hindsight_url = hindsight_fixtures.hindsight_url
hindsight_api_key = hindsight_fixtures.hindsight_api_key
hindsight_admission_url = hindsight_fixtures.hindsight_admission_url
llm_stub = hindsight_fixtures.llm_stub
fresh_bank_id = hindsight_fixtures.fresh_bank_id

pytestmark = [pytest.mark.hindsight, pytest.mark.slow]

#: scripts/hindsight-dev's admission server (DREAMER_TEST_HINDSIGHT_ADMISSION_URL) admits one sync retain
#: at a time: while one is held (its fact extraction parked in the stub), a second waits a second for
#: the slot and is then refused with 503 + Retry-After.
EXTRACTION_HOLD_S = 5.0
#: The holder may itself meet a 503 when another test run's retain has the slot; it waits its turn.
HOLDER_RETRY = RetryPolicy(max_attempts=20, base_delay_s=0.5, max_delay_s=5.0, retry_after_cap_s=5.0)


def make_backend(url: str, api_key: str) -> HindsightBackend:
    config = HindsightBackendConfig(url=url, api_key=SecretStr(api_key), read_timeout_s=120.0)
    return HindsightBackend(config)


@pytest.fixture
async def backend(hindsight_url: str, hindsight_api_key: str) -> AsyncIterator[HindsightBackend]:
    made = make_backend(hindsight_url, hindsight_api_key)
    try:
        yield made
    finally:
        await made.aclose()


class TestServerFaults:
    async def test_llm_failure_during_sync_retain_is_transient(
        self, backend: HindsightBackend, llm_stub: LLMStub, fresh_bank_id: str
    ) -> None:
        """The stub answers 500 to every chat call: the sync retain fails with TransientBackendError 500
        and stores nothing."""
        llm_stub.fault(kind="chat", status=500, count=-1)
        with pytest.raises(TransientBackendError) as caught:
            await backend.retain(
                fresh_bank_id, [RetainItem(content="Ivy runs marathons in Berlin.", document_id="e1")]
            )
        llm_stub.clear()
        assert caught.value.status == 500 and caught.value.operation == "retain"
        assert "Fact extraction failed" in str(caught.value)
        assert await backend.list_units_since(fresh_bank_id, None) == []

    async def test_admission_control_503_carries_retry_after(
        self, hindsight_admission_url: str, hindsight_api_key: str, llm_stub: LLMStub, fresh_bank_id: str
    ) -> None:
        """While one retain holds the only retain slot, a second is refused: TransientBackendError 503
        whose retry_after is the server's Retry-After."""
        backend = make_backend(hindsight_admission_url, hindsight_api_key)
        try:
            await self._second_retain_is_refused(backend, llm_stub, fresh_bank_id)
        finally:
            await backend.aclose()

    @staticmethod
    async def _second_retain_is_refused(
        backend: HindsightBackend, llm_stub: LLMStub, fresh_bank_id: str
    ) -> None:
        llm_stub.reset_log()
        llm_stub.fault(kind="extract", status=None, delay_s=EXTRACTION_HOLD_S, count=1)
        holder = asyncio.create_task(
            call_with_retry(
                "retain",
                lambda: backend.retain(fresh_bank_id, [RetainItem(content="Jan keeps bees.")]),
                HOLDER_RETRY,
            )
        )
        for _ in range(300):  # until the first retain's extraction call is parked in the stub
            if any(r["kind"] == "extract" and r["status"] is None for r in llm_stub.requests()):
                break
            await asyncio.sleep(0.1)
        else:
            holder.cancel()
            pytest.fail("the first retain never reached the LLM stub")
        with pytest.raises(TransientBackendError) as caught:
            await backend.retain(f"{fresh_bank_id}-2", [RetainItem(content="Kim restores old radios.")])
        assert (await holder).items_count == 1
        assert caught.value.status == 503
        assert caught.value.retry_after is not None and caught.value.retry_after >= 1
        assert "at capacity for 'retain'" in str(caught.value)


class TestWrongKey:
    async def test_wrong_key_is_permanent_names_the_setting_and_never_shows_the_key(
        self, hindsight_url: str, fresh_bank_id: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A rejected key is a PermanentBackendError saying which setting to fix; the key text appears
        in no message, repr or log line."""
        caplog.set_level(logging.DEBUG)
        wrong = f"wrong-key-{uuid.uuid4().hex}"
        backend = make_backend(hindsight_url, wrong)
        try:
            with pytest.raises(PermanentBackendError) as caught:
                await backend.activity([fresh_bank_id])
            with pytest.raises(PermanentBackendError) as caught_retain:
                await backend.retain(fresh_bank_id, [RetainItem(content="Lea paints.")])
        finally:
            await backend.aclose()
        for exc in (caught.value, caught_retain.value):
            assert exc.status == 401
            assert "backend.hindsight.api_key_env" in str(exc) and "api_key_file" in str(exc)
            assert wrong not in str(exc) and wrong not in repr(exc) and wrong not in exc.detail
        assert wrong not in repr(backend)
        assert wrong not in caplog.text
