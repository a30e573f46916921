"""The dedup rules Dreamer is compared with, each applied to the cards the real run drafted.

none (every card promoted), exact (mem0's md5 of the stripped lowercased text) and honcho (exact text,
then the single nearest promoted card at cosine >= 0.95).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from bench._common import Embedder, Vectors


def stripped_lower(text: str) -> str:
    return text.strip().lower()


class Policy:
    """A baseline's dedup rule: ``admit`` says which drafted cards are promoted, and records those."""

    name = "none"
    description = "no dedup: every drafted card is promoted"

    def admit(self, texts: Sequence[str]) -> list[bool]:
        """For each text in order (each judged against the promoted set including earlier ones)."""
        return [True for _ in texts]


class ExactHashPolicy(Policy):
    """mem0's exact duplicate check: md5 of the stripped, lowercased text."""

    name = "exact"
    description = "exact hash: md5 of the stripped lowercased text (mem0)"

    def __init__(self) -> None:
        self.hashes: set[str] = set()

    def admit(self, texts: Sequence[str]) -> list[bool]:
        verdicts = []
        for text in texts:
            digest = hashlib.md5(stripped_lower(text).encode("utf-8")).hexdigest()
            verdicts.append(digest not in self.hashes)
            self.hashes.add(digest)
        return verdicts


class HonchoPolicy(Policy):
    """Honcho's rule: exact match on the stripped lowercased text, then drop only when the single
    nearest promoted card is at cosine >= ``threshold`` (0.95, top_k=1)."""

    name = "honcho"
    description = "Honcho: exact text, else the single nearest promoted card at cosine >= 0.95"

    def __init__(self, embedder: Embedder, threshold: float = 0.95) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.texts: set[str] = set()
        self.promoted: Vectors = np.zeros((0, 0), dtype=np.float32)

    def admit(self, texts: Sequence[str]) -> list[bool]:
        if not texts:
            return []
        vectors = self.embedder.embed(list(texts))
        if self.promoted.shape[0] == 0:
            self.promoted = np.zeros((0, vectors.shape[1]), dtype=np.float32)
        verdicts = []
        for text, vector in zip(texts, vectors, strict=True):
            key = stripped_lower(text)
            nearest = float(np.max(self.promoted @ vector)) if self.promoted.shape[0] else -1.0
            keep = key not in self.texts and round(nearest, 6) < self.threshold
            verdicts.append(keep)
            if keep:
                self.texts.add(key)
                self.promoted = np.vstack([self.promoted, vector[np.newaxis, :]])
        return verdicts


def baseline_policies(embedder: Embedder) -> list[Policy]:
    return [Policy(), ExactHashPolicy(), HonchoPolicy(embedder)]
