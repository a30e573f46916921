"""The embedded store's reflect: an extractive answer, without an LLM.

The backend picks the units (the best recall hits for the query, else the bank's newest, as many as
``REFLECT_UNITS_BY_BUDGET`` allows) and :func:`extractive_answer` turns them into a
:class:`~dreamer.backends.base.ReflectResult`: one ``- <unit text>`` line per unit and, when the
response schema asks for a list of cards, one fact card per unit (:func:`fill_card_schema`, which
follows local ``$ref``s and gives other required properties neutral defaults).

Pure: plain values in, plain values out, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dreamer.backends.base import BasedOn, ReflectResult

__all__ = ["REFLECT_UNITS_BY_BUDGET", "extractive_answer", "fill_card_schema"]

#: How many units an extractive reflect is based on, per budget.
REFLECT_UNITS_BY_BUDGET: Mapping[str, int] = {"low": 10, "mid": 20, "high": 40}


def extractive_answer(
    based_on: Sequence[BasedOn], response_schema: Mapping[str, Any] | None
) -> ReflectResult:
    """The reflect answer made of ``based_on``, best first; ``structured`` only for a card-list schema."""
    text = "\n".join(f"- {unit.text}" for unit in based_on)
    structured: Mapping[str, Any] | None = None
    structured_error: str | None = None
    if response_schema is not None:
        structured, structured_error = fill_card_schema(response_schema, based_on)
    return ReflectResult(
        text=text,
        structured=structured,
        structured_error=structured_error,
        based_on=tuple(based_on),
        used_llm=False,
    )


def fill_card_schema(
    schema: Mapping[str, Any], units: Sequence[BasedOn]
) -> tuple[dict[str, Any] | None, str | None]:
    """Fill a "list of cards" response schema with one fact card per unit.

    The schema must be an object with an array property whose items are objects with ``text``,
    ``kind`` and ``source_ids`` properties (local ``$ref``s are followed). Other required properties
    get neutral defaults (first enum value, "", 0, false, [], {}), so any such schema is satisfied.
    Returns ``(structured, None)`` or ``(None, reason)`` when the schema is not of that shape.
    """
    root = schema
    top = _resolve(root, schema)
    properties = top.get("properties")
    if not isinstance(properties, Mapping):
        return None, "extractive reflect can only fill an object schema holding a list of cards"
    for name, prop_schema in properties.items():
        prop = _resolve(root, prop_schema)
        items = _resolve(root, prop.get("items", {})) if prop.get("type") == "array" else {}
        item_properties = items.get("properties")
        if isinstance(item_properties, Mapping) and {"text", "kind", "source_ids"} <= set(item_properties):
            cards = [_card(root, items, unit) for unit in units]
            structured: dict[str, Any] = {}
            for required in top.get("required", []):
                if required != name and required in properties:
                    structured[required] = _default_for(root, properties[required])
            structured[name] = cards
            return structured, None
    return None, (
        "extractive reflect can only fill a schema with an array of cards "
        "(items with text, kind and source_ids)"
    )


def _card(root: Mapping[str, Any], item_schema: Mapping[str, Any], unit: BasedOn) -> dict[str, Any]:
    item_properties: Mapping[str, Any] = item_schema["properties"]
    kind_schema = _resolve(root, item_properties["kind"])
    kinds = kind_schema.get("enum")
    kind = "fact" if not isinstance(kinds, list) or not kinds or "fact" in kinds else kinds[0]
    card: dict[str, Any] = {}
    for required in item_schema.get("required", []):
        if required in item_properties:
            card[required] = _default_for(root, item_properties[required])
    card.update({"text": unit.text, "kind": kind, "source_ids": [unit.id]})
    return card


def _resolve(root: Mapping[str, Any], node: Any) -> Mapping[str, Any]:
    """Follow local ``$ref``s (``#/$defs/X``, ``#/definitions/X``); unknown shapes become ``{}``."""
    seen = 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and seen < 32:
        ref: str = node["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            target = (
                target.get(part.replace("~1", "/").replace("~0", "~"))
                if isinstance(target, Mapping)
                else None
            )
        node = target
        seen += 1
    return node if isinstance(node, Mapping) else {}


def _default_for(root: Mapping[str, Any], node: Any) -> Any:
    """A neutral value valid for a simple JSON schema node."""
    schema = _resolve(root, node)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            resolved = [_resolve(root, option) for option in options]
            if any(option.get("type") == "null" for option in resolved):
                return None
            return _default_for(root, resolved[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else (kind[0] if kind else None)
    defaults: dict[Any, Any] = {
        "string": "",
        "integer": 0,
        "number": 0,
        "boolean": False,
        "array": [],
        "object": {},
        "null": None,
    }
    return defaults.get(kind)
