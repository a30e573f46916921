"""Holds Dreamer's Hindsight response models against a server's own OpenAPI schema.

:func:`openapi_mismatches` walks each model in
:data:`~dreamer.backends.hindsight.models.RESPONSE_MODELS` next to the 200 response schema of its
endpoint and reports every field Dreamer reads that the server's schema lacks, types differently,
or may leave out while the model requires it. A field the server declares optional or nullable but
Dreamer requires on purpose is accepted only when
:data:`~dreamer.backends.hindsight.models.STRICTER_THAN_SERVER` names it. A field the server gives
a default counts as always sent (FastAPI serialises defaults into every response).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from dreamer.backends.hindsight.models import RESPONSE_MODELS, STRICTER_THAN_SERVER

__all__ = ["json_types", "openapi_mismatches"]

_ANY = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})


def _resolve(node: Any, root: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` with local ``$ref``s followed (``#/components/schemas/X`` or ``#/$defs/X``)."""
    for _ in range(20):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            break
        target: Any = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        node = target
    return node if isinstance(node, dict) else {}


def _branches(node: Any, root: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of ``node`` (its ``anyOf``/``oneOf`` branches, or itself), resolved."""
    resolved = _resolve(node, root)
    options = resolved.get("anyOf") or resolved.get("oneOf")
    if isinstance(options, list):
        return [b for option in options for b in _branches(option, root)]
    return [resolved]


def json_types(node: Any, root: Mapping[str, Any]) -> frozenset[str]:
    """The JSON types a schema node allows; a node that says nothing allows every type."""
    found: set[str] = set()
    for branch in _branches(node, root):
        kind = branch.get("type")
        if isinstance(kind, str):
            found.add(kind)
        elif isinstance(kind, list):
            found.update(k for k in kind if isinstance(k, str))
        elif "properties" in branch:
            found.add("object")
        else:
            return _ANY
    return frozenset(found)


def _accepts(model_types: frozenset[str], server_type: str) -> bool:
    return server_type in model_types or (server_type == "integer" and "number" in model_types)


def _object_branch(node: Any, root: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """The branch of ``node`` that is an object with properties (``key="properties"``) or an array
    with items (``key="items"``), if any."""
    return next((b for b in _branches(node, root) if key in b), None)


def _compare_object(
    model_node: Mapping[str, Any],
    model_root: Mapping[str, Any],
    server_node: Mapping[str, Any],
    spec: Mapping[str, Any],
    where: str,
) -> Iterable[str]:
    model_name = str(model_node.get("title", "?"))
    server_name = str(server_node.get("title", where))
    server_props = server_node.get("properties") or {}
    server_required = set(server_node.get("required") or ())
    model_required = set(model_node.get("required") or ())
    for name, model_prop in (model_node.get("properties") or {}).items():
        here = f"{where}.{name}"
        if name not in server_props:
            yield f"{here}: Dreamer reads it but {server_name} has no such field"
            continue
        server_prop = server_props[name]
        excused = (model_name, name) in STRICTER_THAN_SERVER
        model_types = json_types(model_prop, model_root)
        server_types = json_types(server_prop, spec)
        wrong = sorted(t for t in server_types - {"null"} if not _accepts(model_types, t))
        if wrong:
            reads = "/".join(sorted(model_types))
            yield f"{here}: the server may send {'/'.join(wrong)}, the model reads {reads}"
        if "null" in server_types and "null" not in model_types and not excused:
            yield f"{here}: the server may send null, the model does not accept it"
        always_sent = name in server_required or "default" in _resolve(server_prop, spec)
        if name in model_required and not always_sent and not excused:
            yield f"{here}: the model requires it, {server_name} may leave it out"
        yield from _compare_nested(model_prop, model_root, server_prop, spec, here)


def _compare_nested(
    model_prop: Any, model_root: Mapping[str, Any], server_prop: Any, spec: Mapping[str, Any], where: str
) -> Iterable[str]:
    model_object = _object_branch(model_prop, model_root, "properties")
    server_object = _object_branch(server_prop, spec, "properties")
    if model_object is not None and server_object is not None:
        yield from _compare_object(model_object, model_root, server_object, spec, where)
    model_array = _object_branch(model_prop, model_root, "items")
    server_array = _object_branch(server_prop, spec, "items")
    if model_array is not None and server_array is not None:
        yield from _compare_nested(
            model_array["items"], model_root, server_array["items"], spec, f"{where}[]"
        )


def _response_schema(spec: Mapping[str, Any], method: str, path: str) -> dict[str, Any] | None:
    operation = (spec.get("paths") or {}).get(path, {}).get(method.lower())
    if not isinstance(operation, dict):
        return None
    ok = (operation.get("responses") or {}).get("200") or {}
    schema = ((ok.get("content") or {}).get("application/json") or {}).get("schema")
    return _resolve(schema, spec) if schema is not None else None


def openapi_mismatches(
    spec: Mapping[str, Any], models: Iterable[type[BaseModel]] = RESPONSE_MODELS
) -> list[str]:
    """Every way the response ``models`` disagree with the OpenAPI document ``spec`` (empty: none)."""
    problems: list[str] = []
    for model in models:
        method, path = model.endpoint  # type: ignore[attr-defined]
        server = _response_schema(spec, method, path)
        if server is None:
            problems.append(f"{model.__name__}: {method} {path} has no JSON 200 response in the spec")
            continue
        schema = model.model_json_schema()
        problems.extend(_compare_object(schema, schema, server, spec, model.__name__))
    return problems
