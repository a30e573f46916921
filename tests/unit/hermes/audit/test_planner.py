"""The pure audit planner: which entries are deleted, moved, corrected, marked or left alone."""

from __future__ import annotations

from collections.abc import Mapping

from dreamer.hermes.audit.age import EntryAge
from dreamer.hermes.audit.classify import RuleBasedClassifier
from dreamer.hermes.audit.planner import (
    SKILL_DESTINATION,
    ActionKind,
    Plan,
    PlanContext,
    collect_entries,
    correct_model_text,
    plan_audit,
    urls_to_verify,
)
from dreamer.hermes.audit.settings import AuditSettings

CANARY = "CANARY: Do not modify this line"


def plan_for(
    memory: list[str],
    user: list[str],
    *,
    ages: Mapping[str, int] | None = None,
    answers: Mapping[str, bool] | None = None,
    model: str | None = None,
    skill: bool = True,
    settings: AuditSettings | None = None,
) -> Plan:
    entries = collect_entries(memory, user)
    classifier = RuleBasedClassifier()
    classifications = {e.id: classifier.classify(e.text) for e in entries if CANARY not in e.text}
    days = ages or {}
    context = PlanContext(
        settings=settings or AuditSettings(),
        ages={e.id: EntryAge(days.get(e.text, 0), "test") for e in entries},
        url_answers=answers or {},
        configured_model=model,
        skill_available=skill,
    )
    return plan_audit(entries, classifications, context)


def kinds(plan: Plan) -> list[tuple[str, str]]:
    return [(str(a.kind), a.entry) for a in plan.actions]


class TestDeletions:
    """Session notes go; temporary state and snapshots go once stale."""

    def test_session_note_is_deleted(self) -> None:
        """A session note is deleted regardless of age."""
        plan = plan_for([CANARY, "Session note: fixed the build."], [CANARY])
        assert kinds(plan) == [("DELETE", "Session note: fixed the build.")]

    def test_temporary_state_is_kept_until_stale(self) -> None:
        """Temporary state younger than 14 days stays; at 14 days it is deleted."""
        entry = "Verbal offer from Acme, deal pending."
        assert plan_for([CANARY, entry], [CANARY], ages={entry: 13}).actions == ()
        plan = plan_for([CANARY, entry], [CANARY], ages={entry: 14})
        assert kinds(plan) == [("DELETE", entry)]
        assert "14 days old" in plan.actions[0].reason

    def test_snapshot_is_deleted_when_stale(self) -> None:
        """A historical snapshot older than stale_days is deleted as stale."""
        entry = "As of 2024-01-01 the repo had 10 stars."
        plan = plan_for([CANARY, entry], [CANARY], ages={entry: 400})
        assert kinds(plan) == [("DELETE", entry)]
        assert plan.actions[0].reason.startswith("Historical Snapshot")

    def test_facts_are_left_alone(self) -> None:
        """Entries without a category signal produce no action and no unresolved item."""
        plan = plan_for([CANARY, "The project is written in Rust."], [CANARY])
        assert plan.actions == () and plan.unresolved == ()


class TestDuplicates:
    """Copies across the two files: the first one stays."""

    def test_cross_file_duplicate_keeps_the_memory_copy(self) -> None:
        """The USER.md copy (later in order) is deleted; case and spacing do not matter."""
        plan = plan_for([CANARY, "The repo is large."], [CANARY, "the  repo is LARGE."])
        assert kinds(plan) == [("DELETE", "the  repo is LARGE.")]
        assert plan.actions[0].reason.startswith("Duplicate of MEMORY.md entry")

    def test_identical_canaries_are_not_duplicates(self) -> None:
        """The same canary text in both files is protected, never de-duplicated."""
        plan = plan_for([CANARY], [CANARY])
        assert plan.actions == ()
        assert plan.final_memory == (CANARY,) and plan.final_user == (CANARY,)

    def test_uncertain_duplicates_are_kept(self) -> None:
        """Copies of an entry of uncertain category are reported, not deleted."""
        text = "User prefers that you always answer in French."
        plan = plan_for([CANARY, text], [CANARY, text])
        assert plan.actions == ()
        assert len(plan.unresolved) == 2


class TestMoves:
    """Entries in the wrong place move; a move that does not fit is reported and the entry stays."""

    def test_config_in_user_moves_to_memory(self) -> None:
        entry = "Staging DSN lives in ~/.config/app/db.env"
        plan = plan_for([CANARY], [CANARY, entry])
        assert [(a.kind, a.destination) for a in plan.actions] == [(ActionKind.MOVE, "MEMORY.md")]
        assert plan.final_memory == (CANARY, entry)

    def test_identity_and_preference_in_memory_move_to_user(self) -> None:
        identity, preference = "User's name is Ada.", "User prefers short answers."
        plan = plan_for([CANARY, identity, preference], [CANARY])
        assert [a.destination for a in plan.actions] == ["USER.md", "USER.md"]
        assert plan.final_user == (CANARY, identity, preference)

    def test_operating_rule_moves_to_the_skill(self) -> None:
        rule = "Always run pytest before committing."
        plan = plan_for([CANARY, rule], [CANARY])
        assert [a.destination for a in plan.actions] == [SKILL_DESTINATION]
        assert rule not in plan.final_memory

    def test_operating_rule_without_skills_dir_is_unresolved(self) -> None:
        """Without a skills directory the rule stays and is listed as unresolved."""
        rule = "Always run pytest before committing."
        plan = plan_for([CANARY, rule], [CANARY], skill=False)
        assert plan.actions == ()
        assert "no skills directory" in plan.unresolved[0].reason

    def test_move_into_a_full_file_is_unresolved_and_keeps_the_entry(self) -> None:
        """If USER.md has no room, the identity entry stays in MEMORY.md and is reported."""
        identity = "User's name is Ada Lovelace."
        settings = AuditSettings(max_user_chars=40)
        plan = plan_for([CANARY, identity], [CANARY], settings=settings)
        assert plan.actions == ()
        assert identity in plan.final_memory
        assert "move to USER.md not possible" in plan.unresolved[0].reason

    def test_deletions_make_room_before_moves(self) -> None:
        """A deletion in USER.md frees the space an incoming move needs."""
        identity = "User's name is Ada Lovelace."
        note = "Session note: talked about tea for a long while."
        settings = AuditSettings(max_user_chars=len(CANARY) + 3 + len(identity))
        plan = plan_for([CANARY, identity], [CANARY, note], settings=settings)
        assert [str(a.kind) for a in plan.actions] == ["DELETE", "MOVE"]
        assert plan.final_user == (CANARY, identity)


class TestConfigChecks:
    """URL verification results and config.yaml model comparison."""

    def test_silent_url_is_marked_never_deleted(self) -> None:
        """A config whose URL did not answer gets ' [UNVERIFIED]' and stays."""
        entry = "Inference endpoint: http://127.0.0.1:9/v1"
        plan = plan_for([CANARY, entry], [CANARY], answers={"http://127.0.0.1:9/v1": False})
        (action,) = plan.actions
        assert action.kind is ActionKind.MARK_UNVERIFIED
        assert action.new_text == entry + " [UNVERIFIED]"
        assert plan.unverified_total == 1

    def test_answering_url_clears_an_old_mark(self) -> None:
        """A marked config whose URL answers again loses the mark."""
        entry = "Inference endpoint: http://127.0.0.1:9/v1 [UNVERIFIED]"
        plan = plan_for([CANARY, entry], [CANARY], answers={"http://127.0.0.1:9/v1": True})
        (action,) = plan.actions
        assert action.kind is ActionKind.CLEAR_UNVERIFIED
        assert action.new_text == "Inference endpoint: http://127.0.0.1:9/v1"

    def test_marked_and_still_silent_is_not_marked_twice(self) -> None:
        """An entry already marked and still unreachable is left as it is."""
        entry = "Inference endpoint: http://127.0.0.1:9/v1 [UNVERIFIED]"
        assert plan_for([CANARY, entry], [CANARY], answers={"http://127.0.0.1:9/v1": False}).actions == ()

    def test_model_mismatch_is_corrected(self) -> None:
        """'model: gpt-4o' becomes the config.yaml model, keeping the rest of the entry."""
        entry = "Default model: gpt-4o (via openrouter)."
        plan = plan_for([CANARY, entry], [CANARY], model="anthropic/claude-opus-4.6")
        (action,) = plan.actions
        assert action.kind is ActionKind.CORRECT
        assert action.new_text == "Default model: anthropic/claude-opus-4.6 (via openrouter)."

    def test_matching_model_is_left_alone(self) -> None:
        """A model entry that agrees with config.yaml (trailing period aside) needs no correction."""
        assert correct_model_text("model: `qwen3:32b`.", "qwen3:32b") is None

    def test_urls_to_verify_come_from_config_entries_only(self) -> None:
        """Only technical-config entries have their URLs probed."""
        entries = collect_entries(
            [
                CANARY,
                "Endpoint http://127.0.0.1:1/x",
                "Session note: in this session we just fixed https://a.test/y",
            ],
            [],
        )
        classifier = RuleBasedClassifier()
        classifications = {e.id: classifier.classify(e.text) for e in entries if CANARY not in e.text}
        assert urls_to_verify(entries, classifications) == ("http://127.0.0.1:1/x",)


class TestUnresolved:
    """Low-confidence entries are reported with the reason and never touched."""

    def test_ambiguous_entry_is_unresolved(self) -> None:
        """An ambiguous entry produces no action and an unresolved item with the evidence."""
        text = "User prefers that you always answer in French."
        plan = plan_for([CANARY, text], [CANARY])
        assert plan.actions == ()
        (item,) = plan.unresolved
        assert item.file == "MEMORY.md" and item.entry == text
        assert "ambiguous" in item.reason

    def test_canary_entries_are_never_planned(self) -> None:
        """An entry holding a canary line is untouched even if it reads like a session note."""
        entry = f"Session note: {CANARY}"
        assert plan_for([entry], [CANARY]).actions == ()
