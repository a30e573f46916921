"""The data the vector benchmark searches: clustered unit vectors, card sentences, exact answers."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

DIMENSION = 384
QUERIES = 20
K = 10
#: Vectors are drawn around this many centres, so neighbours are closer than random vectors are.
CENTRES = 256
SPREAD = 0.6

#: Twenty LoCoMo-like cards: one fact each, people, dates and small events.
CARDS = (
    "Caroline went to an LGBTQ support group on 7 May 2023 and found the stories inspiring.",
    "Melanie painted a lake sunrise last year and hung it in her living room.",
    "John prefers Hawaiian pizza for its sweet and salty combination.",
    "James shared advice with John about opening moves in chess.",
    "Maria's grandmother died last week, and she is taking time off work.",
    "Evan bought a new red bicycle to ride to the office on weekdays.",
    "Sam plans a painting session with Evan next Saturday afternoon.",
    "Caroline is researching adoption agencies because she wants to build a family.",
    "Melanie ran a charity race for mental health in June 2023.",
    "John's dog Max loves to swim in the lake near their cabin.",
    "James started learning Spanish with an app and practices every evening.",
    "Evan's sister moved to Toronto for a new nursing job in March.",
    "Sam is grateful for Evan's support after the difficult surgery.",
    "Maria volunteers at the homeless shelter every second Sunday.",
    "Caroline's friends gave her a handmade necklace for her birthday.",
    "Melanie took her kids camping at the beach during the summer holidays.",
    "John finished reading a fantasy novel series recommended by James.",
    "James adopted two kittens from the animal rescue in April.",
    "Evan is training for a marathon and runs 40 kilometres a week.",
    "Sam and Maria met at a pottery class downtown last autumn.",
)

Vectors = npt.NDArray[np.float32]


def clustered(count: int, seed: int, centres: Vectors | None = None) -> tuple[Vectors, Vectors]:
    """``count`` unit vectors around shared centres (deterministic per seed), and the centres."""
    rng = np.random.default_rng(seed)
    if centres is None:
        centres = rng.standard_normal((CENTRES, DIMENSION)).astype(np.float32)
    picks = rng.integers(0, centres.shape[0], size=count)
    noise = rng.standard_normal((count, DIMENSION)).astype(np.float32) * SPREAD
    out = centres[picks] + noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32), centres


def exact_top_k(queries: Vectors, stored: Vectors, k: int) -> list[set[int]]:
    """The true ``k`` nearest rows of each query, by float32 cosine."""
    scores = queries @ stored.T
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return [set(int(i) for i in row) for row in part]


def recall_at_k(found: list[list[int]], exact: list[set[int]]) -> float:
    """Mean share of the exact neighbours that a method found."""
    hits = [len(set(f) & e) / len(e) for f, e in zip(found, exact, strict=True)]
    return float(sum(hits) / len(hits))
