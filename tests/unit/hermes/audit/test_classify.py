"""The rule-based entry classifier: categories, confidence, refusal to guess, and the persona category."""

from __future__ import annotations

import pytest

from dreamer.hermes.audit.classify import Category, RuleBasedClassifier

CLASSIFIER = RuleBasedClassifier()


class TestCategories:
    """Clear entries land in the contract's categories with confidence."""

    @pytest.mark.parametrize(
        ("entry", "category"),
        [
            ("Session note: debugged the flaky websocket test.", Category.SESSION_NOTE),
            ("In this session we just fixed the login bug.", Category.SESSION_NOTE),
            ("Verbal offer from Acme, deal pending.", Category.TEMPORARY_STATE),
            ("Waiting for the landlord to reply; on hold until next week.", Category.TEMPORARY_STATE),
            ("As of 2025-01-01 the repo had 1,204 stars.", Category.HISTORICAL_SNAPSHOT),
            ("Inference endpoint: http://127.0.0.1:8080/v1", Category.TECHNICAL_CONFIG),
            ("Default model: anthropic/claude-opus-4.6", Category.TECHNICAL_CONFIG),
            ("OPENAI_API_BASE points at the local proxy config", Category.TECHNICAL_CONFIG),
            ("User's name is Ada Lovelace; she lives in London.", Category.IDENTITY),
            ("Ada is a backend engineer.", Category.IDENTITY),
            ("User prefers concise answers without emoji.", Category.PREFERENCE),
            ("Always run pytest before committing; never push to main.", Category.OPERATING_RULE),
            ("Procedure: rebuild the index, then restart the worker.", Category.OPERATING_RULE),
            ("The project is written in Rust.", Category.FACT),
        ],
    )
    def test_category(self, entry: str, category: Category) -> None:
        """Each example gets its category and is confident enough to act on."""
        result = CLASSIFIER.classify(entry)
        assert result.category is category
        assert result.confident, result.reason

    def test_no_signal_is_a_fact(self) -> None:
        """An entry matching no rule is a Fact, with the reason saying so."""
        result = CLASSIFIER.classify("The office has a blue door.")
        assert result.category is Category.FACT
        assert result.confidence == 1.0
        assert "no signal" in result.reason

    def test_same_group_signals_do_not_conflict(self) -> None:
        """Identity and preference evidence together both mean 'user profile', so it is confident."""
        result = CLASSIFIER.classify("User's favourite editor is Helix.")
        assert result.confident
        assert result.category in (Category.IDENTITY, Category.PREFERENCE)


class TestUncertainty:
    """Competing or weak evidence is reported, never guessed."""

    def test_competing_groups_are_ambiguous(self) -> None:
        """A preference phrased as a rule is not confident and names both candidates."""
        result = CLASSIFIER.classify("User prefers that you always answer in French.")
        assert not result.confident
        assert result.reason.startswith("ambiguous:")
        assert "Preference" in result.reason and "Operating Rule" in result.reason

    def test_single_weak_signal_is_not_enough(self) -> None:
        """One weak word ('currently') does not make an entry temporary state."""
        result = CLASSIFIER.classify("Currently reading Dune.")
        assert not result.confident
        assert result.reason.startswith("weak evidence only")

    def test_classification_is_deterministic(self) -> None:
        """The same text always gets the same classification."""
        text = "As of 2024-05-01 the API endpoint was http://127.0.0.1:1/v1"
        assert {CLASSIFIER.classify(text) for _ in range(5)} == {CLASSIFIER.classify(text)}


class TestPersona:
    @pytest.mark.parametrize(
        "entry",
        [
            "You are Koby, a terse homelab assistant who speaks like a seasoned sysadmin.",
            "Your name is Tanko and your tone is warm.",
            "I'm the homelab agent for Ada's network.",
        ],
    )
    def test_persona_entries(self, entry: str) -> None:
        """The agent's own identity and voice is a confident Persona."""
        found = RuleBasedClassifier().classify(entry)
        assert found.category is Category.PERSONA and found.confident

    @pytest.mark.parametrize(
        "entry",
        [
            "You are currently helping with the migration.",
            "Always run pytest -q in /home/ada/src/dreamer before pushing.",
            "User's name is Ada.",
        ],
    )
    def test_not_persona(self, entry: str) -> None:
        """A passing state, an operating rule and the user's identity are not Persona."""
        assert RuleBasedClassifier().classify(entry).category is not Category.PERSONA
