"""The LoCoMo benchmark's baseline policies: no dedup, exact hash, and Honcho's nearest-card rule."""

from __future__ import annotations

from bench._common import HashedEmbedder
from bench.locomo.baselines import ExactHashPolicy, HonchoPolicy, Policy


class TestPolicies:
    def test_no_dedup_admits_everything(self) -> None:
        """The no-dedup baseline promotes every drafted card, repeats included."""
        assert Policy().admit(["a b", "a b"]) == [True, True]

    def test_exact_hash_ignores_case_and_outer_space(self) -> None:
        """mem0's md5 rule drops a card equal once stripped and lowercased, across batches."""
        policy = ExactHashPolicy()
        assert policy.admit(["Ada keeps bees.", "  ada keeps BEES. "]) == [True, False]
        assert policy.admit(["Ada keeps bees."]) == [False]
        assert policy.admit(["Ada keeps wasps."]) == [True]

    def test_honcho_drops_only_at_095_of_the_nearest(self) -> None:
        """Honcho's rule drops a card whose nearest promoted card is at cosine >= 0.95, keeps others."""
        policy = HonchoPolicy(HashedEmbedder())
        verdicts = policy.admit(
            [
                "Evan plans a painting session with Sam.",
                "Sam plans a painting session with Evan.",  # same words: cosine 1.0 on unigrams
                "Evan bought a red kayak last summer.",
            ]
        )
        assert verdicts == [True, False, True]

    def test_honcho_exact_text_is_dropped(self) -> None:
        """An exact (stripped, lowercased) repeat is dropped before any similarity."""
        policy = HonchoPolicy(HashedEmbedder())
        policy.admit(["Ada keeps bees."])
        assert policy.admit(["ADA KEEPS BEES."]) == [False]
