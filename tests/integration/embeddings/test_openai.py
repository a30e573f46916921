"""The openai provider against a real OpenAI-compatible server on 127.0.0.1 (tests/support/
embeddings_server.py: real sockets, the real MiniLM model), faults included."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dreamer.config import Config
from dreamer.embeddings.cache import CachingEmbedder
from dreamer.embeddings.factory import make_embedder
from dreamer.embeddings.local import LocalEmbedder
from dreamer.embeddings.openai import OpenAIEmbedder
from dreamer.errors import PermanentBackendError, ProtocolError, RetriesExhausted, TransientBackendError
from dreamer.retry import RetryPolicy, call_with_retry
from tests.support.configs import config_data, parsed
from tests.support.embedding_model import local_embedder
from tests.support.embeddings_server import EmbeddingsServer, serve
from tests.support.hostile_server import Answer, HostileServer

KEY = "emb-test-5f3a9c1e7b2d4a60"
TEXTS = [
    "Maria's grandma passed away last week, causing her to go through a tough time.",
    "Maria's grandmother passed away last week.",
    "Nextcloud runs version 28.0 on host atlas.",
    "   ",
    "John prefers Hawaiian pizza.",
]


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    return local_embedder()


@pytest.fixture
def server(model: LocalEmbedder) -> Iterator[EmbeddingsServer]:
    with serve(model, key=KEY) as running:
        yield running


def config_for(url: str, **extra: object) -> Config:
    def change(data: dict[str, object]) -> None:
        data["embeddings"] = {
            "provider": "openai",
            "url": url,
            "model": "all-minilm-l6-v2",
            "api_key_env": "EMB_KEY",
            "timeout_s": 60.0,
            **extra,
        }

    return parsed(config_data(), change, base_dir=Path("/tmp"), environ={"EMB_KEY": KEY})


def embedder_for(url: str, **extra: object) -> OpenAIEmbedder:
    embedder = make_embedder(config_for(url, **extra))
    assert isinstance(embedder, CachingEmbedder) and isinstance(embedder.inner, OpenAIEmbedder)
    return embedder.inner


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TestAnswers:
    async def test_vectors_equal_the_local_embedders(
        self, server: EmbeddingsServer, model: LocalEmbedder
    ) -> None:
        """Over HTTP, in batches, rows placed by index: the same unit vectors as in-process."""
        embedder = embedder_for(server.url, batch_size=2)
        try:
            got = await embedder.embed(TEXTS)
        finally:
            await embedder.aclose()
        expected = model.embed_sync(TEXTS)
        assert got.shape == expected.shape and got.dtype == np.float32
        assert np.allclose(got, expected, atol=1e-6)
        assert embedder.dimension == 384
        sent = server.embedding_requests()
        assert [len(r["input"]) for r in sent] == [2, 2, 1]
        assert all(r["model"] == "all-minilm-l6-v2" for r in sent)
        assert all(text.strip() for r in sent for text in r["input"])  # a blank text is never sent

    async def test_bearer_key_is_sent(self, server: EmbeddingsServer) -> None:
        """The key from api_key_env goes in the Authorization header."""
        embedder = embedder_for(server.url)
        try:
            await embedder.embed(["x"])
        finally:
            await embedder.aclose()
        assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"

    async def test_url_ending_in_v1(self, server: EmbeddingsServer) -> None:
        """A base URL written with /v1 reaches the same endpoint."""
        embedder = embedder_for(server.url + "/v1")
        try:
            assert (await embedder.embed(["x"])).shape == (1, 384)
        finally:
            await embedder.aclose()
        assert server.requests[-1].path == "/v1/embeddings"

    async def test_no_texts_no_request(self, server: EmbeddingsServer) -> None:
        """Embedding nothing sends nothing."""
        embedder = embedder_for(server.url)
        try:
            assert (await embedder.embed([])).shape[0] == 0
        finally:
            await embedder.aclose()
        assert server.requests == []


class TestFaults:
    async def test_503_then_success_is_retried_honouring_retry_after(self, server: EmbeddingsServer) -> None:
        """Two 503s with Retry-After, then an answer: the retry rules wait as asked and succeed."""
        server.fail("unavailable", times=2, retry_after="7")
        embedder = embedder_for(server.url)
        slept: list[float] = []

        async def sleep(delay: float) -> None:
            slept.append(delay)

        try:
            got = await call_with_retry(
                "embed", lambda: embedder.embed(TEXTS[:2]), RetryPolicy(), sleep=sleep
            )
        finally:
            await embedder.aclose()
        assert got.shape == (2, 384) and slept == [7.0, 7.0]

    async def test_503_for_ever_exhausts_the_retries(self, server: EmbeddingsServer) -> None:
        """A server that keeps answering 503 ends in RetriesExhausted after max_attempts."""
        server.fail("unavailable", retry_after="0")
        embedder = embedder_for(server.url)
        try:
            with pytest.raises(RetriesExhausted) as caught:
                await call_with_retry("embed", lambda: embedder.embed(["x"]), RetryPolicy(max_attempts=3))
        finally:
            await embedder.aclose()
        assert caught.value.attempts == 3 and caught.value.last.status == 503
        assert caught.value.last.operation == "embed"

    async def test_down_server_is_transient(self) -> None:
        """Nothing listening: a transient error naming the URL and the key to check."""
        url = f"http://127.0.0.1:{free_port()}"
        embedder = embedder_for(url)
        try:
            with pytest.raises(TransientBackendError) as caught:
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()
        assert url in str(caught.value) and "embeddings.url" in str(caught.value)

    async def test_hanging_server_times_out_as_transient(self, server: EmbeddingsServer) -> None:
        """A server that never answers: a transient timeout after timeout_s, naming the setting."""
        server.fail("hang")
        embedder = embedder_for(server.url, timeout_s=0.3)
        try:
            with pytest.raises(TransientBackendError) as caught:
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()
        assert "embeddings.timeout_s" in str(caught.value)

    @pytest.mark.parametrize(
        ("mode", "what"), [("garbage", "not an embeddings list"), ("short", "vectors for")]
    )
    async def test_garbage_is_a_protocol_error(self, server: EmbeddingsServer, mode: str, what: str) -> None:
        """A body that is not an embeddings list, or one vector short, is a ProtocolError."""
        server.fail(mode)
        embedder = embedder_for(server.url)
        try:
            with pytest.raises(ProtocolError, match=what):
                await embedder.embed(["a", "b"])
        finally:
            await embedder.aclose()

    async def test_wrong_key_is_permanent_and_never_shown(
        self, server: EmbeddingsServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A refused key is a permanent error with the server's message and the keys to check; the
        key itself appears in no message and no log record."""
        caplog.set_level(logging.DEBUG)
        server.key = "another-key-entirely"
        embedder = embedder_for(server.url)
        try:
            with pytest.raises(PermanentBackendError) as caught:
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()
        message = str(caught.value)
        assert caught.value.status == 401 and "invalid api key" in message and "api_key_env" in message
        for text in (message, caplog.text, repr(embedder)):
            assert KEY not in text and KEY[:12] not in text


class TestHostileAnswers:
    @pytest.mark.parametrize("scale", [1e39, 1e-46])
    async def test_numbers_beyond_float32_become_the_same_unit_vectors(
        self, server: EmbeddingsServer, model: LocalEmbedder, scale: float
    ) -> None:
        """A server that answers unnormalised vectors whose numbers lie beyond float32's range
        (1e39 overflows, 1e-46 underflows) still gives finite unit vectors equal to the model's,
        never a NaN or zero vector that would be stored and compared."""
        server.scale = scale
        embedder = embedder_for(server.url)
        try:
            got = await embedder.embed(TEXTS[:3])
        finally:
            await embedder.aclose()
        assert np.isfinite(got).all()
        assert np.allclose(got, model.embed_sync(TEXTS[:3]), atol=1e-5)

    async def test_a_million_number_vector_is_a_protocol_error(self, server: EmbeddingsServer) -> None:
        """A vector of 10^6 numbers is refused as garbage, not stored or compared."""
        server.fail("wide")
        embedder = embedder_for(server.url)
        try:
            with pytest.raises(ProtocolError, match="not an embeddings list"):
                await embedder.embed(["a", "b"])
        finally:
            await embedder.aclose()

    async def test_another_dimension_within_one_process_is_a_protocol_error(
        self, server: EmbeddingsServer
    ) -> None:
        """A server whose model changes length between two calls of one process is refused,
        saying to restart, rather than mixing lengths."""
        embedder = embedder_for(server.url)
        try:
            await embedder.embed(["a"])
            server.dimensions = 128
            with pytest.raises(ProtocolError, match="restart Dreamer"):
                await embedder.embed(["b"])
        finally:
            await embedder.aclose()


class TestRedirects:
    """A real server on 127.0.0.1 that redirects to an address carrying the key: refused, never
    followed, and the error names the target's host only."""

    @pytest.mark.parametrize(
        "location",
        [
            "https://login.example/cb?token={auth}",
            "http://127.0.0.1:9/{auth}/v1/embeddings",
            "/v1/embeddings?key={auth_raw}",
        ],
    )
    async def test_refused_and_the_target_is_not_printed(self, location: str) -> None:
        server = HostileServer(Answer.redirect(location))
        embedder = embedder_for(server.url)
        try:
            with pytest.raises(PermanentBackendError) as caught:
                await embedder.embed(["a"])
        finally:
            await embedder.aclose()
            server.close()
        message = str(caught.value)
        assert "redirects are not followed" in message and "embeddings.url" in message
        assert KEY[4:12] not in message and "token" not in message and "key=" not in message, message
        assert caught.value.detail == ""
        assert len(server.requests) == 1


class TestTrickling:
    async def test_a_trickled_answer_is_cut_at_timeout_s(self) -> None:
        """A real server on 127.0.0.1 that sends 600 bytes one every 50 ms (30 s in all, no read
        waiting long): the call fails as transient at timeout_s, naming it."""
        server = HostileServer(Answer(status=200, body="{" + " " * 598 + "}", trickle_s=0.05))
        embedder = embedder_for(server.url, timeout_s=1.0)
        try:
            with pytest.raises(TransientBackendError, match="no whole answer within 1s"):
                await embedder.embed(["a"])
        finally:
            await embedder.aclose()
            server.close()
