"""`dreamer explain` on real roll-ups: the trail of a unit (promoted, merged as a reworded or an
exact duplicate, dropped as chatter, pending, unknown), of a card after several runs (made of,
merged into it, superseded), and of a text, as text and as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config
from dreamer.service.runner import run_rollups_now
from dreamer.state import StateStore
from tests.support.cli import run_dreamer
from tests.support.configs import config_data, write_toml
from tests.support.embedding_model import local_embedder

NEXTCLOUD = "Nextcloud runs version 27.1 on host atlas behind nginx."
NEXTCLOUD_NEW = "Nextcloud runs version 28.0 on host atlas behind nginx."
BACKUP = "The nightly restic backup of host atlas runs at 02:30 to the NAS."
BACKUP_REWORDED = "Host atlas runs its nightly restic backup to the NAS at 02:30."
CHATTER = "ok thanks, that's all for now"


class History:
    """Three roll-ups of one profile on the embedded store, and one unit written after them."""

    def __init__(self, tmp_path: Path) -> None:
        data = config_data(
            {"global": {}, "shared": {}, "research": {"access": "read_write"}},
            ("research",),
            state_dir=str(tmp_path / "state"),
            embeddings={"provider": "none"},
        )
        self.config_path = write_toml(tmp_path / "config.toml", data)
        from dreamer.config import load_config

        self.config: Config = load_config(self.config_path)
        self.ids: dict[str, str] = {}

    async def write(self, *texts: str) -> None:
        backend = EmbeddedBackend(self.config.embedded_path)
        try:
            bank = self.config.profile_bank_id("research")
            await backend.retain(
                bank,
                [RetainItem(content=t, document_id=f"doc-{len(self.ids) + i}") for i, t in enumerate(texts)],
            )
            for unit in await backend.list_units_since(bank, None):
                self.ids.setdefault(unit.text, unit.id)
        finally:
            await backend.aclose()

    async def roll(self) -> None:
        (report,) = await run_rollups_now(self.config, ["research"])
        assert report.outcome in ("promoted", "reinforced"), report.reason

    def explain(self, *args: str) -> tuple[int, str]:
        done = run_dreamer(self.config_path, "explain", *args)
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stdout

    def explain_json(self, *args: str) -> dict[str, Any]:
        code, out = self.explain(*args, "--json")
        doc = json.loads(out)
        assert isinstance(doc, dict)
        doc["exit"] = code
        return doc

    def card_of(self, text: str) -> str:
        with StateStore.open(self.config.state_path) as state:
            (card,) = [c for c in state.ledger() if c.text == text]
            return card.document_id


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    h = History(tmp_path_factory.mktemp("explain"))

    async def main() -> None:
        await h.write(NEXTCLOUD, BACKUP, CHATTER)
        await h.roll()
        await h.write(BACKUP_REWORDED)
        await h.roll()
        await h.write(NEXTCLOUD_NEW)
        await h.roll()
        await h.write("Grafana listens on port 3000 on host hermes-mon.")

    anyio.run(main)
    return h


class TestUnit:
    def test_a_promoted_unit_names_its_card_and_the_rule(self, history: History) -> None:
        """A unit a run promoted: the run, "promoted into card <id>", the rule; the card's text."""
        code, out = history.explain(history.ids[BACKUP])
        assert code == 0, out
        assert f"promoted into card {history.card_of(BACKUP)}" in out
        assert "rule: " in out and BACKUP in out

    def test_a_reworded_duplicate_says_which_card_it_was_merged_into_and_the_scores(
        self, history: History
    ) -> None:
        """A later unit saying the same fact in other words: merged into the stored card, with the
        lexical rule and its scores (JSON: verdict duplicate, the card, jaccard among the scores)."""
        doc = history.explain_json(history.ids[BACKUP_REWORDED])
        assert doc["exit"] == 0
        (decision,) = doc["decisions"]
        assert decision["verdict"] == "duplicate"
        assert decision["card"] == decision["matched"] == history.card_of(BACKUP)
        assert "jaccard" in decision["scores"] and decision["reason"]
        _, out = history.explain(history.ids[BACKUP_REWORDED])
        assert f"merged into card {history.card_of(BACKUP)} (a duplicate of it)" in out and "scores: " in out

    def test_a_chatter_unit_says_it_was_dropped_and_why(self, history: History) -> None:
        """Chatter: "dropped as chatter" with the salience reason, and no card."""
        doc = history.explain_json(history.ids[CHATTER])
        (decision,) = doc["decisions"]
        assert decision["verdict"] == "chatter" and decision["card"] is None and decision["reason"]
        assert doc["cards"] == []
        assert "dropped as chatter" in history.explain(history.ids[CHATTER])[1]

    def test_a_superseded_units_card_says_what_supersedes_it(self, history: History) -> None:
        """The 27.1 unit's card is superseded by the 28.0 card (a conflict the third run promoted);
        the 28.0 unit's decision is a conflict naming the card it supersedes."""
        old, new = history.card_of(NEXTCLOUD), history.card_of(NEXTCLOUD_NEW)
        doc = history.explain_json(history.ids[NEXTCLOUD])
        assert [c["superseded_by"] for c in doc["cards"]] == [[new]]
        newer = history.explain_json(history.ids[NEXTCLOUD_NEW])
        (decision,) = newer["decisions"]
        assert decision["verdict"] == "conflict" and decision["matched"] == old and decision["card"] == new
        assert f"superseded by {new}" in history.explain(history.ids[NEXTCLOUD])[1]

    def test_a_unit_no_run_has_read_is_pending(self, history: History) -> None:
        """A unit written after the last run: pending after research's watermark, exit 0."""
        unit = history.ids["Grafana listens on port 3000 on host hermes-mon."]
        doc = history.explain_json(unit)
        assert doc["exit"] == 0 and doc["decisions"] == []
        assert doc["pending"] == {"profile": "research", "bank": history.config.profile_bank_id("research")}
        assert "pending: after the watermark of profile research" in history.explain(unit)[1]

    def test_an_unknown_unit_is_not_found_and_exits_1(self, history: History) -> None:
        """An id nothing knows: "not found", naming where it looked, exit 1."""
        code, out = history.explain("no-such-unit")
        assert code == 1 and "not found" in out and "searched: research" in out


class TestCard:
    def test_a_card_after_several_runs_shows_what_made_it_and_what_was_merged_since(
        self, history: History
    ) -> None:
        """The backup card: made of the first run's unit, the reworded unit of the second merged into
        it, reinforced once."""
        card = history.card_of(BACKUP)
        doc = history.explain_json("--card", card)
        assert doc["exit"] == 0 and doc["card"]["reinforcements"] == 1
        assert [d["unit_id"] for d in doc["made_of"]] == [history.ids[BACKUP]]
        assert [d["unit_id"] for d in doc["folded_in"]] == [history.ids[BACKUP_REWORDED]]
        assert len({d["run_id"] for d in doc["made_of"] + doc["folded_in"]}) == 2
        _, out = history.explain("--card", card)
        assert "made of:" in out and "merged into it since:" in out and BACKUP in out
        # Found by two roll-ups: the count and the dates of the two, in the text and the JSON.
        assert doc["card"]["told"]["times"] == 2
        assert f"    {doc['card']['told']['text']}" in out.splitlines()
        assert doc["card"]["told"]["text"].startswith("seen 2 times, ")

    def test_a_superseded_card_names_the_card_that_supersedes_it(self, history: History) -> None:
        """--card on the 27.1 card: superseded by the 28.0 card; the 28.0 card says it supersedes it."""
        old, new = history.card_of(NEXTCLOUD), history.card_of(NEXTCLOUD_NEW)
        assert history.explain_json("--card", old)["card"]["superseded_by"] == [new]
        assert history.explain_json("--card", new)["card"]["supersedes"] == old

    def test_an_unknown_card_exits_1(self, history: History) -> None:
        """A document id the ledger and the trail do not hold: exit 1, said."""
        code, out = history.explain("--card", "rollup:research:" + "0" * 32)
        assert code == 1 and "not in the ledger" in out


class TestText:
    def test_a_text_already_carded_is_a_duplicate_of_that_card(self, history: History) -> None:
        """--text with a stored card's words: duplicate, matching that card, and its trail."""
        doc = history.explain_json("--text", BACKUP_REWORDED)
        assert doc["verdict"] == "duplicate" and doc["matched"] == history.card_of(BACKUP)
        assert doc["matched_card"]["card"]["document_id"] == history.card_of(BACKUP)

    def test_a_new_text_would_be_new(self, history: History) -> None:
        """--text with a fact no card holds: new, matching nothing."""
        doc = history.explain_json("--text", "The printer on floor two needs toner every March.")
        assert doc["exit"] == 0 and doc["verdict"] == "new" and doc["matched_card"] is None


GRANDMA = "Maria's grandma passed away last week, causing her to go through a tough time."
GRANDMOTHER = "Maria's grandmother passed away last week."


def judged_history(tmp_path: Path, embeddings: dict[str, Any]) -> History:
    """GRANDMA rolled up on the embedded store, then the configuration's [embeddings] changed."""
    h = History(tmp_path)

    async def main() -> None:
        await h.write(GRANDMA)
        await h.roll()

    anyio.run(main)
    data = config_data(
        {"global": {}, "shared": {}, "research": {"access": "read_write"}},
        ("research",),
        state_dir=str(tmp_path / "state"),
        embeddings=embeddings,
    )
    write_toml(h.config_path, data)
    return h


class TestTextWithTheEmbedder:
    def test_a_paraphrase_the_model_merges_is_a_duplicate_with_its_cosine(self, tmp_path: Path) -> None:
        """With the local model configured, --text judges as a run does: a paraphrase that shares
        few words with the card is a duplicate of it by the model's cosine, and says so."""
        local_embedder()  # skips (or fails under DREAMER_REQUIRE_EMBED=1) without the model
        h = judged_history(tmp_path, {"provider": "local"})
        doc = h.explain_json("--text", GRANDMOTHER)
        assert doc["verdict"] == "duplicate" and doc["matched"] == h.card_of(GRANDMA), doc
        assert doc["scores"]["cosine"] >= 0.8 and doc["judge"].startswith("lexical and the embedder local:")

    def test_without_the_embedder_the_same_paraphrase_is_new(self, tmp_path: Path) -> None:
        """The lexical judge alone (provider "none") does not find that card: the verdict is new."""
        h = judged_history(tmp_path, {"provider": "none"})
        doc = h.explain_json("--text", GRANDMOTHER)
        assert doc["verdict"] == "new" and doc["judge"] == "lexical", doc

    def test_an_embedder_that_cannot_be_asked_leaves_the_verdict_lexical_saying_why(
        self, tmp_path: Path
    ) -> None:
        """An embeddings server that is down: the verdict is the lexical one, the judge line names
        the embedder and its error, and the command still answers (exit 0, no traceback)."""
        down = {"provider": "openai", "url": "http://127.0.0.1:9", "model": "m", "timeout_s": 2.0}
        h = judged_history(tmp_path, down)
        code, out = h.explain("--text", GRANDMOTHER)
        assert code == 0 and "would be new" in out, out
        assert "judged by: lexical (the embedder openai:m failed:" in out, out


class TestArguments:
    def test_two_things_at_once_is_a_usage_error(self, history: History) -> None:
        """A UNIT_ID and --card together: exit 2, saying to name one thing."""
        done = run_dreamer(history.config_path, "explain", "x", "--card", "y")
        assert done.returncode == 2 and "name one thing to explain" in done.stderr

    def test_without_a_state_file_it_says_where_it_looked(self, tmp_path: Path) -> None:
        """No state file: exit 1, naming the file it looked for; nothing created."""
        config = write_toml(tmp_path / "config.toml", config_data(state_dir=str(tmp_path / "state")))
        done = run_dreamer(config, "explain", "--card", "rollup:research:x")
        assert done.returncode == 1 and "no state file at" in done.stdout
        assert not (tmp_path / "state").exists()


class TestBeforeTheTrail:
    def test_a_unit_promoted_before_decisions_were_kept_is_found_by_its_card(self, tmp_path: Path) -> None:
        """A state file whose cards predate the trail (its decisions table empty, as after the
        upgrade from schema 5): the unit is found through the card that cites it, said so, exit 0."""
        h = History(tmp_path)

        async def main() -> None:
            await h.write(BACKUP)
            await h.roll()

        anyio.run(main)
        with StateStore.open(h.config.state_path) as state:
            state._conn.execute("DELETE FROM decisions")
        code, out = h.explain(h.ids[BACKUP])
        assert code == 0, out
        assert "promoted before decisions were recorded" in out and h.card_of(BACKUP) in out


class TestHostileInput:
    def test_an_id_with_control_characters_is_printed_harmless(self, history: History) -> None:
        """An id carrying a terminal escape and a newline is echoed with neither: the line a
        person reads cannot be rewritten by what they pasted."""
        code, out = history.explain("x\x1b[2J\nnope")
        assert code == 1 and "\x1b" not in out
        assert out.splitlines()[0].startswith("unit x")
