"""Memory tool definitions: valid JSON Schema, OpenAI's shape, and bank enums that follow the policy."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError  # type: ignore[import-untyped]

from dreamer.config import Config
from dreamer.errors import PolicyError
from dreamer.readside.tools import HINDSIGHT_TOOLS, TOOL_NAMES, ToolSet, tool_schemas
from tests.support.configs import parsed

BASE: dict[str, Any] = {
    "banks": {
        "global": {"bank_id": "private__hermes", "access": "read_write"},
        "shared": {"bank_id": "shared", "description": "Cross-agent knowledge."},
        "research": {
            "bank_id": "private__hermes__research",
            "access": "read_write",
            "description": "Research notes, paper summaries.",
        },
        "coder": {"bank_id": "private__hermes__coder", "access": "read_write"},
        "ops": {"bank_id": "ops", "description": "Deployment, infrastructure, host quirks."},
        "code": {"bank_id": "code", "access": "read_write", "description": "Repository conventions."},
        "archive": {"bank_id": "archive", "access": "read_write", "enabled": False},
    },
    "profiles": {"research": {"bank": "research"}, "coder": {"bank": "coder"}},
}


def config_with(change: Callable[[dict[str, Any]], None] | None = None) -> Config:
    return parsed(BASE, change)


def tools(config: Config, profile: str | None = "research", strict: bool = False) -> dict[str, Any]:
    return {t["function"]["name"]: t["function"] for t in tool_schemas(config, profile, strict)}


def tools_of(tool_set: ToolSet, strict: bool = False) -> dict[str, Any]:
    return {
        t["function"]["name"]: t["function"]
        for t in tool_schemas(config_with(), "research", strict, tool_set)
    }


def bank_enum(function: dict[str, Any]) -> list[Any]:
    return list(function["parameters"]["properties"]["bank"]["enum"])


VARIANTS = [(profile, strict) for profile in (None, "research", "coder") for strict in (False, True)]


class TestShape:
    @pytest.mark.parametrize(("profile", "strict"), VARIANTS)
    def test_every_schema_is_valid_json_schema(self, profile: str | None, strict: bool) -> None:
        """Every tool's parameters pass the Draft 2020-12 meta-schema and the whole list is JSON."""
        schemas = tool_schemas(config_with(), profile, strict)
        assert json.loads(json.dumps(schemas)) == schemas
        for tool in schemas:
            Draft202012Validator.check_schema(tool["function"]["parameters"])

    @pytest.mark.parametrize(("profile", "strict"), VARIANTS)
    def test_openai_function_tool_shape(self, profile: str | None, strict: bool) -> None:
        """Each tool is {"type": "function", "function": {name, description, parameters}}."""
        for tool in tool_schemas(config_with(), profile, strict):
            assert tool["type"] == "function"
            function = tool["function"]
            expected_keys = {"name", "description", "parameters"} | ({"strict"} if strict else set())
            assert set(function) == expected_keys
            assert function["name"] in TOOL_NAMES and function["description"]
            assert function["parameters"]["type"] == "object"
            assert function["parameters"]["additionalProperties"] is False

    def test_tool_parameters(self) -> None:
        """recall(query, bank, banks), retain(content, context, tags, bank), reflect(query, bank)."""
        found = tools(config_with())
        assert list(found) == ["memory_recall", "memory_retain", "memory_reflect"]
        assert list(found["memory_recall"]["parameters"]["properties"]) == ["query", "bank", "banks"]
        assert list(found["memory_retain"]["parameters"]["properties"]) == [
            "content",
            "context",
            "tags",
            "bank",
        ]
        assert list(found["memory_reflect"]["parameters"]["properties"]) == ["query", "bank"]
        assert found["memory_recall"]["parameters"]["required"] == ["query"]
        assert found["memory_retain"]["parameters"]["required"] == ["content"]

    def test_same_config_same_schemas(self) -> None:
        """The output is deterministic: the same configuration gives equal JSON."""
        assert json.dumps(tool_schemas(config_with(), "research")) == json.dumps(
            tool_schemas(config_with(), "research")
        )


class TestBankEnums:
    def test_readable_banks_for_recall_and_reflect(self) -> None:
        """recall/reflect offer every enabled bank, read-only ones and the global bank included."""
        found = tools(config_with())
        readable = ["global", "shared", "research", "coder", "ops", "code"]
        assert bank_enum(found["memory_recall"]) == readable
        assert bank_enum(found["memory_reflect"]) == readable
        assert found["memory_recall"]["parameters"]["properties"]["banks"]["items"]["enum"] == readable

    def test_writable_banks_for_retain(self) -> None:
        """retain offers only read_write banks: never global, read-only, disabled or another profile's."""
        assert bank_enum(tools(config_with())["memory_retain"]) == ["research", "code"]
        assert bank_enum(tools(config_with(), "coder")["memory_retain"]) == ["coder", "code"]
        assert bank_enum(tools(config_with(), None)["memory_retain"]) == ["research", "coder", "code"]

    def test_disabled_bank_appears_nowhere(self) -> None:
        """A disabled bank is in no enum and no description."""
        for profile, strict in VARIANTS:
            assert "archive" not in json.dumps(tool_schemas(config_with(), profile, strict))

    def test_no_writable_bank_omits_retain(self) -> None:
        """When nothing is writable there is no memory_retain tool at all."""

        def read_only(data: dict[str, Any]) -> None:
            for bank in data["banks"].values():
                bank["access"] = "read_only"

        assert list(tools(config_with(read_only))) == ["memory_recall", "memory_reflect"]

    def test_descriptions_name_each_alias(self) -> None:
        """The bank description lists each alias with what it is for, in enum order."""
        description = tools(config_with())["memory_recall"]["parameters"]["properties"]["bank"]["description"]
        lines = description.splitlines()
        assert "- ops: Deployment, infrastructure, host quirks." in lines
        assert "- research: Research notes, paper summaries." in lines
        assert "- coder: own bank of profile coder" in lines
        assert [line.split(":")[0][2:] for line in lines if line.startswith("- ")] == bank_enum(
            tools(config_with())["memory_recall"]
        )

    def test_one_readable_bank_has_no_banks_list(self) -> None:
        """With a single readable bank there is nothing to combine, so no 'banks' property."""
        data = {"banks": {"global": {"bank_id": "g"}}, "topology": {"shared": None}}
        config = parsed(data)
        found = tools(config, None)
        assert list(found["memory_recall"]["parameters"]["properties"]) == ["query", "bank"]
        assert "memory_retain" not in found

    def test_bank_required_without_a_default(self) -> None:
        """Without profile or default bank, retain and reflect require a bank."""
        found = tools(config_with(), None)
        assert found["memory_retain"]["parameters"]["required"] == ["content", "bank"]
        assert found["memory_reflect"]["parameters"]["required"] == ["query", "bank"]

    def test_descriptions_say_where_an_unnamed_call_goes(self) -> None:
        """Recall names the read-union; retain names the default bank."""
        found = tools(config_with())
        assert "(research, global, shared)" in found["memory_recall"]["description"]
        assert "'research'" in found["memory_retain"]["description"]

    def test_recall_description_says_what_superseded_means(self) -> None:
        """The model is told that a (superseded) result was replaced and which one to trust."""
        description = tools(config_with())["memory_recall"]["description"]
        assert "(superseded)" in description and "trust the newer one" in description

    def test_unknown_profile(self) -> None:
        """Schemas for an unknown profile are refused."""
        with pytest.raises(PolicyError, match="unknown profile"):
            tool_schemas(config_with(), "nobody")


class TestStrictMode:
    def test_strict_flags(self) -> None:
        """strict: every property required, optional ones nullable, no keyword strict mode rejects."""
        for function in tools(config_with(), strict=True).values():
            parameters = function["parameters"]
            assert function["strict"] is True
            assert parameters["required"] == list(parameters["properties"])
            assert "minItems" not in json.dumps(parameters) and "uniqueItems" not in json.dumps(parameters)
        retain = tools(config_with(), strict=True)["memory_retain"]["parameters"]["properties"]
        assert retain["content"]["type"] == "string"
        assert retain["context"]["type"] == ["string", "null"]
        assert retain["tags"]["type"] == ["array", "null"]
        assert retain["bank"]["enum"] == ["research", "code", None]


def validator(function: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(function["parameters"])


class TestArgumentsValidate:
    def test_valid_calls(self) -> None:
        """Calls a model would make validate, in both modes."""
        loose = tools(config_with())
        validator(loose["memory_recall"]).validate({"query": "deploys", "banks": ["ops", "code"]})
        validator(loose["memory_retain"]).validate({"content": "uses pnpm", "bank": "code", "tags": ["repo"]})
        strict = tools(config_with(), strict=True)
        validator(strict["memory_recall"]).validate({"query": "q", "bank": None, "banks": None})
        validator(strict["memory_retain"]).validate(
            {"content": "x", "context": None, "tags": None, "bank": None}
        )

    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("memory_recall", {"query": "q", "bank": "invented"}),
            ("memory_recall", {"query": "q", "bank": "archive"}),
            ("memory_recall", {"query": "q", "banks": []}),
            ("memory_recall", {"query": "q", "banks": ["ops", "ops"]}),
            ("memory_retain", {"content": "x", "bank": "global"}),
            ("memory_retain", {"content": "x", "bank": "ops"}),
            ("memory_retain", {"content": "x", "bank": "coder"}),
            ("memory_reflect", {"bank": "ops"}),
            ("memory_reflect", {"query": "q", "extra": 1}),
        ],
    )
    def test_invalid_calls(self, tool: str, arguments: dict[str, Any]) -> None:
        """Invented, disabled, non-writable banks, empty or repeated lists, unknown keys are rejected."""
        with pytest.raises(ValidationError):
            validator(tools(config_with())[tool]).validate(arguments)

    def test_strict_requires_every_key(self) -> None:
        """In strict mode leaving a key out (instead of passing null) is rejected."""
        with pytest.raises(ValidationError):
            validator(tools(config_with(), strict=True)["memory_reflect"]).validate({"query": "q"})


class TestScopeArgument:
    """``scope`` on hindsight_retain: what scope_tag accepts, said in the schema too."""

    def test_loose_schema_checks_a_scope_like_scope_tag(self) -> None:
        """A scope scope_tag accepts validates; one it refuses (colon, empty, too long, space) does not."""
        retain = validator(tools_of(HINDSIGHT_TOOLS)["hindsight_retain"])
        retain.validate({"content": "runs 29.0", "scope": "staging-2.eu_w"})
        for bad in ("prod:eu", "", "s" * 65, "two words"):
            with pytest.raises(ValidationError):
                retain.validate({"content": "x", "scope": bad})

    def test_strict_schema_leaves_out_the_keywords_strict_mode_rejects(self) -> None:
        """Strict mode has no pattern or maxLength; a null scope means none."""
        schema = tools_of(HINDSIGHT_TOOLS, strict=True)["hindsight_retain"]
        scope = schema["parameters"]["properties"]["scope"]
        assert "pattern" not in scope and "maxLength" not in scope
        assert scope["type"] == ["string", "null"]
