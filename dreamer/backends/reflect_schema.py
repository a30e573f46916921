"""The ``response_schema`` a reflect asks for, generated from a strict pydantic model of the answer.

``Model.model_json_schema()`` carries pydantic's bookkeeping: ``title`` on every node, ``$defs``
with ``$ref`` pointers, the class docstring as ``description``, ``default`` on fields with a
default, and such fields left out of ``required``. :func:`reflect_response_schema` gives the plain
schema the LLM is asked to fill: nested models inlined, no titles or class docstrings, every
property required, and a ``default`` only where a field declares one for the LLM to see
(``json_schema_extra``); field descriptions stay. The answer is still parsed by the model itself,
which may be more tolerant than the schema (a missing field taking its default).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

__all__ = ["reflect_response_schema"]


class _PlainSchema(GenerateJsonSchema):
    """Pydantic's generator without titles and defaults, with every property required."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        generated = super().model_schema(schema)
        generated.pop("title", None)
        generated.pop("description", None)  # the class docstring is for readers of the code
        return generated

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        return True


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def reflect_response_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model`` as sent to reflect: inlined, untitled, every property required."""
    generated = model.model_json_schema(schema_generator=_PlainSchema)
    defs = generated.pop("$defs", {})
    inlined: dict[str, Any] = _inline(generated, defs)
    return inlined
