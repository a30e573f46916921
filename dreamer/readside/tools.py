"""Memory tools for an agent framework: JSON definitions, and running a call against the router.

:func:`tool_schemas` returns OpenAI-style function tools (``{"type": "function", "function":
{"name", "description", "parameters"}}``), named and shaped by a :class:`ToolSet`:

- ``memory_recall(query, bank?, banks?)``
- ``memory_retain(content, context?, tags?, bank?)``, only when some bank is writable
- ``memory_reflect(query, bank?)``

:data:`HINDSIGHT_TOOLS` gives the same tools under the names of Hermes' Hindsight plugin, with
``banks`` on reflect and ``scope`` on retain: ``hindsight_recall(query, bank?, banks?)``,
``hindsight_retain(content, context?, tags?, bank?, scope?)``, ``hindsight_reflect(query, bank?,
banks?)``.

``bank`` is an enum of exactly the aliases the profile may use for that operation (see
:class:`~dreamer.readside.policy.BankPolicy`), so a model cannot name a bank that does not exist, and its
description lists each alias with what the bank is for, so the model can pick the right domain.
Without ``bank``, recall reads the profile's read-union (or the default bank when there is no
profile); reflect and retain use the default bank. When an operation has no usable default,
``bank`` is required.

``strict=True`` produces OpenAI strict mode: ``"strict": true``, ``additionalProperties: false``,
every property required, optional ones nullable (a model passes ``null`` to leave one out), and no
keywords strict mode rejects (``minItems``, ``uniqueItems``).

:func:`run_tool_call` executes one call with those semantics (``null`` meaning "not given").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dreamer.config import Config
from dreamer.errors import PolicyError
from dreamer.readside.answers import RecallAnswer, ReflectAnswer, RetainAnswer
from dreamer.readside.policy import BankPolicy
from dreamer.readside.router import BankRouter
from dreamer.readside.scope import MAX_SCOPE_CHARS, SCOPE_PATTERN

__all__ = ["HINDSIGHT_TOOLS", "MEMORY_TOOLS", "TOOL_NAMES", "ToolSet", "run_tool_call", "tool_schemas"]


@dataclass(frozen=True, slots=True)
class ToolSet:
    """The names of the three tools, and the optional arguments they offer beyond the common ones."""

    recall: str
    retain: str
    reflect: str
    reflect_banks: bool = False
    retain_scope: bool = False

    @property
    def names(self) -> tuple[str, str, str]:
        return (self.recall, self.retain, self.reflect)


MEMORY_TOOLS = ToolSet("memory_recall", "memory_retain", "memory_reflect")
#: The names of Hermes' bundled Hindsight plugin, so existing Hermes tool calls keep working.
HINDSIGHT_TOOLS = ToolSet(
    "hindsight_recall", "hindsight_retain", "hindsight_reflect", reflect_banks=True, retain_scope=True
)
RECALL_TOOL, RETAIN_TOOL, REFLECT_TOOL = MEMORY_TOOLS.names
TOOL_NAMES = MEMORY_TOOLS.names


def tool_schemas(
    config: Config, profile: str | None = None, strict: bool = False, tools: ToolSet = MEMORY_TOOLS
) -> list[dict[str, Any]]:
    """The memory tools ``profile`` (None: no profile) may use, as JSON-ready dicts."""
    return policy_tool_schemas(BankPolicy(config, profile), strict, tools)


def policy_tool_schemas(policy: BankPolicy, strict: bool, tools: ToolSet) -> list[dict[str, Any]]:
    """:func:`tool_schemas` for an existing policy."""
    out: list[dict[str, Any]] = []
    if policy.aliases_for("recall"):
        out.append(_recall_tool(policy, strict, tools))
    if policy.aliases_for("retain"):
        out.append(_retain_tool(policy, strict, tools))
    if policy.aliases_for("reflect"):
        out.append(_reflect_tool(policy, strict, tools))
    return out


# --- the three tools ----------------------------------------------------------------------------


def _recall_tool(policy: BankPolicy, strict: bool, tools: ToolSet) -> dict[str, Any]:
    readable = policy.aliases_for("recall")
    if policy.profile is not None:
        union = ", ".join(policy.union_aliases())
        default = f"Leave bank and banks out to search your usual banks together ({union})."
    elif (alias := policy.default_for("recall")) is not None:
        default = f"Leave bank and banks out to search the default bank {alias!r}."
    else:
        default = "Name a bank (or several with banks)."
    description = (
        "Search long-term memory for facts relevant to a query. Each result line starts with the "
        "bank it came from, e.g. [ops] or [code,research] when several banks hold it; weigh facts by "
        "their bank. A result marked (superseded) was replaced by a newer fact, named after it: "
        f"trust the newer one. {default}"
    )
    properties: dict[str, dict[str, Any]] = {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "bank": _bank_property(policy, readable, "The one bank to search."),
    }
    if len(readable) > 1:
        properties["banks"] = _banks_property(
            readable,
            "Several banks to search at once (aliases as listed for bank); results are merged and labelled.",
            strict,
        )
    return _function(tools.recall, description, properties, required=["query"], strict=strict)


def _retain_tool(policy: BankPolicy, strict: bool, tools: ToolSet) -> dict[str, Any]:
    writable = policy.aliases_for("retain")
    default = policy.default_for("retain")
    where = (
        f"Leave bank out to store it in {default!r}."
        if default is not None
        else "Name the bank to store it in."
    )
    description = (
        "Store one durable fact, decision or preference in long-term memory, self-contained and in "
        f"plain words. Pick the bank whose domain fits the fact. {where}"
    )
    properties: dict[str, dict[str, Any]] = {
        "content": {"type": "string", "description": "The fact to remember, self-contained."},
        "context": {
            "type": "string",
            "description": "Where the fact comes from or what it is about (e.g. 'repo convention').",
        },
        "tags": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Optional labels to filter by later.",
        },
        "bank": _bank_property(policy, writable, "The bank to store the fact in."),
    }
    if tools.retain_scope:
        properties["scope"] = {
            "type": "string",
            "description": "Optional scope the fact holds in (e.g. a host, project or repository); "
            "stored as the tag scope:<value>, so facts of different scopes are kept apart. Letters, "
            f"digits, '.', '_', '-'; at most {MAX_SCOPE_CHARS}.",
        }
        if not strict:  # keywords strict mode rejects
            properties["scope"].update(pattern=SCOPE_PATTERN, maxLength=MAX_SCOPE_CHARS)
    required = ["content"] if default is not None else ["content", "bank"]
    return _function(tools.retain, description, properties, required=required, strict=strict)


def _reflect_tool(policy: BankPolicy, strict: bool, tools: ToolSet) -> dict[str, Any]:
    readable = policy.aliases_for("reflect")
    default = policy.default_for("reflect")
    where = f"Leave bank out to ask {default!r}." if default is not None else "Name the bank to ask."
    each = " With banks, each bank answers separately, labelled." if tools.reflect_banks else ""
    description = (
        "Ask one memory bank a question and get an answer synthesised from what it holds (slower "
        f"than {tools.recall}; use it for questions that need several facts put together). {where}{each}"
    )
    properties: dict[str, dict[str, Any]] = {
        "query": {"type": "string", "description": "The question to answer from memory."},
        "bank": _bank_property(policy, readable, "The bank to ask."),
    }
    if tools.reflect_banks and len(readable) > 1:
        properties["banks"] = _banks_property(
            readable,
            "Several banks to ask at once (aliases as listed for bank); one answer per bank.",
            strict,
        )
    required = ["query"] if default is not None else ["query", "bank"]
    return _function(tools.reflect, description, properties, required=required, strict=strict)


# --- building blocks ----------------------------------------------------------------------------


def _bank_property(policy: BankPolicy, aliases: Sequence[str], lead: str) -> dict[str, Any]:
    lines = [f"{lead} One of:"]
    lines.extend(f"- {alias}: {policy.summary(alias)}" for alias in aliases)
    return {"type": "string", "enum": list(aliases), "description": "\n".join(lines)}


def _banks_property(aliases: Sequence[str], description: str, strict: bool) -> dict[str, Any]:
    banks: dict[str, Any] = {
        "type": "array",
        "items": {"type": "string", "enum": list(aliases)},
        "description": description,
    }
    if not strict:
        banks.update(minItems=1, uniqueItems=True)
    return banks


def _function(
    name: str,
    description: str,
    properties: dict[str, dict[str, Any]],
    *,
    required: list[str],
    strict: bool,
) -> dict[str, Any]:
    if strict:
        properties = {
            key: schema if key in required else _nullable(schema) for key, schema in properties.items()
        }
        required = list(properties)
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    function: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The same property, also accepting null (strict mode's way of saying "optional")."""
    out = dict(schema)
    out["type"] = [schema["type"], "null"]
    if "enum" in schema:
        out["enum"] = [*schema["enum"], None]
    out["description"] = schema.get("description", "") + "\nnull: not given."
    return out


# --- running a call -----------------------------------------------------------------------------


async def run_tool_call(
    router: BankRouter, name: str, arguments: Mapping[str, Any], tools: ToolSet = MEMORY_TOOLS
) -> RecallAnswer | ReflectAnswer | RetainAnswer:
    """Execute one memory tool call; ``null`` arguments mean "not given". Refusals are PolicyError,
    raised before anything is sent."""
    args = {key: value for key, value in arguments.items() if value is not None}
    if name == tools.recall:
        query = _string(args, "query", name)
        bank = _optional_string(args, "bank", name)
        banks = _strings(args, "banks", name)
        if bank is not None and banks is not None:
            raise PolicyError(f"{name}: give bank or banks, not both")
        if bank is not None:
            return await router.recall(query, banks=[bank])
        if banks is not None:
            return await router.recall(query, banks=banks)
        if router.profile is not None:
            return await router.read_union(query)
        return await router.recall(query)
    if name == tools.reflect:
        query = _string(args, "query", name)
        bank = _optional_string(args, "bank", name)
        banks = _strings(args, "banks", name) if tools.reflect_banks else None
        if bank is not None and banks is not None:
            raise PolicyError(f"{name}: give bank or banks, not both")
        return await router.reflect_each(
            query, banks if banks is not None else (None if bank is None else [bank])
        )
    if name == tools.retain:
        known = {"content", "context", "tags", "bank", *(("scope",) if tools.retain_scope else ())}
        unknown = sorted(set(args) - known)
        if unknown:
            # A write must not land somewhere the caller did not mean: banks=["code"] stored in
            # the default bank would look done.
            hint = "; a memory is stored in one bank: give bank, not banks" if "banks" in unknown else ""
            raise PolicyError(
                f"{name}: unknown argument {', '.join(map(repr, unknown))} (known: "
                f"{', '.join(sorted(known))}){hint}; nothing was stored"
            )
        return await router.retain(
            _string(args, "content", name),
            bank=_optional_string(args, "bank", name),
            context=_optional_string(args, "context", name),
            tags=_strings(args, "tags", name) or (),
            scope=_optional_string(args, "scope", name) if tools.retain_scope else None,
        )
    raise PolicyError(f"unknown tool {name!r} (known: {', '.join(tools.names)})")


def _string(args: Mapping[str, Any], key: str, tool: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"{tool}: {key!r} must be a non-empty string")
    return value


def _optional_string(args: Mapping[str, Any], key: str, tool: str) -> str | None:
    value = args.get(key)
    if value is not None and not isinstance(value, str):
        raise PolicyError(f"{tool}: {key!r} must be a string")
    return value


def _strings(args: Mapping[str, Any], key: str, tool: str) -> list[str] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{tool}: {key!r} must be a list of strings")
    return list(value)
