"""The realistic ledger: LoCoMo sentences refilled card by card, names from a pool growing by Heaps' law.

The classes on top run on the benchmark tests' LoCoMo-shaped fixture (no dataset text); the last
reads the real conversations and is skipped without them.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from bench.scale.realistic import (
    HEAPS_BETA,
    CardFill,
    RealisticLedger,
    distinct_content_words,
    law_vocabulary,
    mint_name,
    name_pool,
)
from bench.scale.templates import load_templates, parse_template
from dreamer.rollup.cards import MAX_CARD_CHARS
from dreamer.text import stem
from tests.locomo import require_data
from tests.support.locomo_conversation import fixture_conversation

#: Cards read by the tests on the real conversations (the vocabulary is compared at both sizes).
SMALL, LARGE = 2_000, 20_000


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    (tmp_path / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
    return tmp_path


class TestMintName:
    def test_distinct_ids_give_distinct_names(self) -> None:
        """No two of the first 200,000 ids share a name (a 1M-card ledger has about 107,000)."""
        assert len({mint_name(k) for k in range(200_000)}) == 200_000

    def test_a_name_is_its_own_stem(self) -> None:
        """The stemmer leaves a minted name whole, so two names never read as one content word."""
        for k in range(0, 100_000, 997):
            name = mint_name(k).lower()
            assert stem(name) == name


class TestNamePool:
    def test_the_pool_fills_the_law_beyond_the_templates_own_words(self, fixture_dir: Path) -> None:
        """At ledger sizes where the law outgrows the templates, names plus the templates' words
        are the law's vocabulary."""
        templates = load_templates(fixture_dir)
        for cards in (10_000, 100_000, 1_000_000):
            total = name_pool(cards, templates) + templates.fixed_vocabulary
            assert total == pytest.approx(law_vocabulary(cards), abs=1)

    def test_the_pool_grows_by_the_law_and_never_shrinks(self, fixture_dir: Path) -> None:
        """Each size has at least the names of the size before; ten times the cards, about 10 ** 0.6
        times the vocabulary."""
        templates = load_templates(fixture_dir)
        sizes = [1, 10, 100, 1_000, 10_000, 100_000]
        pools = [name_pool(n, templates) for n in sizes]
        assert pools == sorted(pools) and pools[0] >= 1
        assert law_vocabulary(20_000) / law_vocabulary(2_000) == pytest.approx(10**HEAPS_BETA)


class TestCardFill:
    def test_names_and_values_are_replaced(self, fixture_dir: Path) -> None:
        """Over many cards no original name, time or date is kept, and a number or year rarely (a
        new draw may meet the old value)."""
        templates = load_templates(fixture_dir)
        template = parse_template(
            "Sam met Alex at 3:15 pm on 8 May, 2023 and paid 47 dollars in 2021.", frozenset({"Sam", "Alex"})
        )
        kept = 0
        for card in range(200):
            fill = CardFill(500, [], templates, random.Random(card))
            text = fill.render(template)
            assert not re.search(r"\b(Sam|Alex|3:15|8 May, 2023)\b", text), text
            kept += " 47 " in text or " 2021." in text
        assert kept <= 20

    def test_one_original_is_one_value_in_a_card(self, fixture_dir: Path) -> None:
        """A name told twice in a card is the same new name both times."""
        templates = load_templates(fixture_dir)
        fill = CardFill(500, [], templates, random.Random(1))
        first = fill.render(parse_template("Sam runs.", frozenset({"Sam"})))
        second = fill.render(parse_template("Sam swims.", frozenset({"Sam"})))
        assert first.split()[0] == second.split()[0] != "Sam"

    def test_new_names_are_used_first(self, fixture_dir: Path) -> None:
        """A card given the pool's new ids names its people with them, in order."""
        templates = load_templates(fixture_dir)
        fill = CardFill(500, [600, 601], templates, random.Random(1))
        text = fill.render(parse_template("Sam met Alex.", frozenset({"Sam", "Alex"})))
        assert text == f"{mint_name(600)} met {mint_name(601)}."

    def test_an_article_agrees_with_a_new_phrase(self, fixture_dir: Path) -> None:
        """ "a" before a phrase that now starts with a vowel becomes "an", and back."""
        templates = load_templates(fixture_dir)
        template = parse_template("Sam has a dog.", frozenset({"Sam"}))
        for card in range(100):
            text = CardFill(500, [], templates, random.Random(card)).render(template)
            assert not re.search(r"\ba [aeiou]|\ban [^aeiou ]", text), text


class TestOnTheFixture:
    def test_the_same_index_gives_the_same_card_in_another_process(self, fixture_dir: Path) -> None:
        """Cards are a function of their index alone, whatever the process's hash seed."""
        code = (
            "import sys, json; from pathlib import Path; from bench.scale.realistic import RealisticLedger; "
            "ledger = RealisticLedger(Path(sys.argv[1])); "
            "print(json.dumps([ledger.card_text(i) for i in range(300)] + ledger.new_unit_texts(300, 20)))"
        )
        env = {**os.environ, "PYTHONHASHSEED": "12345"}
        out = subprocess.run(
            [sys.executable, "-c", code, str(fixture_dir)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        ledger = RealisticLedger(fixture_dir)
        assert json.loads(out) == [ledger.card_text(i) for i in range(300)] + ledger.new_unit_texts(300, 20)

    def test_cards_are_non_empty_and_within_the_cap(self, fixture_dir: Path) -> None:
        """Every card has text and at most the card cap of characters."""
        ledger = RealisticLedger(fixture_dir)
        for i in range(2_000):
            text = ledger.card_text(i)
            assert text.strip() and len(text) <= MAX_CARD_CHARS


@cache
def _real_cards(directory: Path) -> tuple[str, ...]:
    ledger = RealisticLedger(directory)
    return tuple(ledger.card_text(i) for i in range(LARGE))


def _speakers(directory: Path) -> set[str]:
    found = set()
    for path in directory.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        found |= {data["speaker_a"], data["speaker_b"]}
    return found


class TestOnLocomo:
    def test_the_vocabulary_grows_with_the_ledger_as_the_law_says(self) -> None:
        """Ten times the cards, about 10 ** 0.6 (3.98) times the distinct content words, within 20%,
        and near the law's count at 20,000 cards (within 15%)."""
        cards = _real_cards(require_data())
        small, large = distinct_content_words(cards[:SMALL]), distinct_content_words(cards)
        assert large / small == pytest.approx(10**HEAPS_BETA, rel=0.2)
        assert large == pytest.approx(law_vocabulary(LARGE), rel=0.15)

    def test_no_speaker_name_survives(self) -> None:
        """At least 95% of cards, and every new unit, name none of LoCoMo's speakers."""
        directory = require_data()
        pattern = re.compile(r"\b(" + "|".join(sorted(_speakers(directory))) + r")\b")
        cards = _real_cards(directory)[:5_000]
        assert sum(1 for text in cards if pattern.search(text)) <= 0.05 * len(cards)
        units = RealisticLedger(directory).new_unit_texts(10_000, 20)
        assert not [text for text in units if pattern.search(text)]

    def test_every_card_is_a_short_memory_text(self) -> None:
        """Non-empty, at most the card cap, ending as a sentence ends (or cut at the cap), even
        where the LoCoMo memory has no stop."""
        for text in _real_cards(require_data()):
            assert text.strip() and len(text) <= MAX_CARD_CHARS
            assert len(text) == MAX_CARD_CHARS or text[-1] in ".!?\"')", text

    def test_new_units_restate_ledger_cards_and_stay_from_ten_thousand_cards_on(self) -> None:
        """Every second new unit restates one of the first 10,000 cards, so those are the same
        texts at 10k and 100k; each restatement keeps its card's first name."""
        ledger = RealisticLedger(require_data())
        at_10k, at_100k = ledger.new_unit_texts(10_000, 20), ledger.new_unit_texts(100_000, 20)
        assert len(set(at_10k)) == 20 and at_10k[::2] == at_100k[::2]
        names = re.compile(r"\b[A-Z][a-z]+\b")
        restated = [(i, text) for i in range(300) if (text := ledger.restated(i))]
        assert len(restated) >= 50
        for i, text in restated:
            card = ledger.card_text(i)
            assert set(names.findall(text)) & set(names.findall(card)), (card, text)
