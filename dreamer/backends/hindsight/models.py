"""Strict models of the Hindsight 1.1 responses the backend reads, and the one way to parse them.

Each model names only the fields Dreamer reads; extra fields are ignored, so a newer server that
sends more still parses. Types are checked strictly (no string-to-number coercion, no bool for an
int). :func:`parse_response` turns a pydantic ``ValidationError`` into a short
:class:`~dreamer.errors.ProtocolError` naming the operation and the field.

Top-level models carry the endpoint they answer (``endpoint``); a field the model requires that
the server's OpenAPI schema leaves optional or nullable is listed in ``STRICTER_THAN_SERVER`` with
the reason. ``tests/support/openapi_check.py`` holds both against a server's ``/openapi.json``.
What each tolerance is for: ``docs/design/hindsight.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Final, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, FiniteFloat, ValidationError

from dreamer.errors import ProtocolError

__all__ = [
    "RESPONSE_MODELS",
    "STRICTER_THAN_SERVER",
    "BankPage",
    "ConsolidateAnswer",
    "RecallAnswer",
    "RecallHit",
    "ReflectAnswer",
    "ReflectFact",
    "ResponseModel",
    "RetainAnswer",
    "UnitCount",
    "UnitPage",
    "UnitRow",
    "parse_response",
    "protocol_error",
]


def protocol_error(operation: str, where: str, problem: str) -> ProtocolError:
    """The :class:`ProtocolError` for an answer to ``operation`` that has the wrong shape at ``where``."""
    return ProtocolError(
        f"Hindsight answered {operation} with an unexpected shape: {where}: {problem}; "
        "check that backend.hindsight.url points at a Hindsight 1.1 API server",
        operation=operation,
    )


def _timestamp(value: Any) -> datetime | None:
    """An ISO-8601 string as an aware UTC datetime; null and "" (Hindsight's "unknown") are None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 string or null, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {value[:40]!r}") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


#: A timestamp that may be missing: null or "" is None.
OptTimestamp = Annotated[datetime | None, BeforeValidator(_timestamp)]
#: A timestamp that must be there: null or "" is an error.
Timestamp = Annotated[datetime, BeforeValidator(_timestamp)]


class _Answer(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class ResponseModel(_Answer):
    """A whole response body; ``endpoint`` is the (method, OpenAPI path) it is the 200 answer of."""

    endpoint: ClassVar[tuple[str, str]]


# --- GET /v1/default/banks -------------------------------------------------------------------


class BankRow(_Answer):
    bank_id: str
    fact_count: int
    last_write_at: OptTimestamp = None


class BankPage(ResponseModel):
    endpoint = ("GET", "/v1/default/banks")
    banks: list[BankRow]
    total: int


# --- GET .../memories/list -------------------------------------------------------------------


class UnitRow(_Answer):
    id: str
    text: str
    fact_type: str
    #: The row's write watermark; reported as ``MemoryUnit.created_at``.
    updated_at: Timestamp
    mentioned_at: OptTimestamp = None
    document_id: str | None = None
    context: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, str] | None = None
    proof_count: int = 1
    source_memory_ids: list[str] | None = None


class UnitPage(ResponseModel):
    endpoint = ("GET", "/v1/default/banks/{bank_id}/memories/list")
    items: list[UnitRow]


class UnitCount(ResponseModel):
    endpoint = ("GET", "/v1/default/banks/{bank_id}/memories/list")
    total: int


# --- POST .../memories/recall ----------------------------------------------------------------


class RecallScores(_Answer):
    final: FiniteFloat
    semantic: FiniteFloat | None = None


class RecallHit(_Answer):
    id: str
    text: str
    type: str
    scores: RecallScores
    document_id: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, str] | None = None
    mentioned_at: OptTimestamp = None


class RecallAnswer(ResponseModel):
    endpoint = ("POST", "/v1/default/banks/{bank_id}/memories/recall")
    results: list[RecallHit]


# --- POST .../reflect ------------------------------------------------------------------------


class ReflectFact(_Answer):
    #: Nullable on the server; a fact without an id is useless as provenance and is skipped.
    id: str | None = None
    text: str
    document_id: str | None = None
    type: str | None = None


class ReflectBasedOn(_Answer):
    memories: list[ReflectFact] = Field(default_factory=list)


class ReflectAnswer(ResponseModel):
    endpoint = ("POST", "/v1/default/banks/{bank_id}/reflect")
    text: str
    based_on: ReflectBasedOn | None = None
    structured_output: dict[str, Any] | None = None
    structured_output_error: str | None = None
    #: ``{"input_tokens", "output_tokens", ...}``; read leniently (`dreamer.llm.usage.usage_from`).
    usage: Any = None


# --- POST .../memories, POST .../consolidate -------------------------------------------------


class RetainAnswer(ResponseModel):
    endpoint = ("POST", "/v1/default/banks/{bank_id}/memories")
    success: bool
    bank_id: str
    items_count: int


class ConsolidateAnswer(ResponseModel):
    endpoint = ("POST", "/v1/default/banks/{bank_id}/consolidate")
    operation_id: str


#: Fields a model requires although the 1.1.0 OpenAPI schema lets the server omit them or send
#: null, keyed by (model name, field), with why a missing value must stay a ProtocolError.
STRICTER_THAN_SERVER: Final[dict[tuple[str, str], str]] = {
    ("UnitRow", "fact_type"): "a MemoryUnit needs its fact type; 1.1.0 sets it on every row",
    ("UnitRow", "updated_at"): "the paging watermark; 1.1.0 sets it on every row",
    ("RecallHit", "type"): "a RecallItem needs its fact type; 1.1.0 sets it on every result",
    ("RecallHit", "scores"): "a RecallItem needs a score; 1.1.0 scores every result",
}

#: Every response model, for the check against a server's OpenAPI schema.
RESPONSE_MODELS: Final[tuple[type[ResponseModel], ...]] = (
    BankPage,
    UnitPage,
    UnitCount,
    RecallAnswer,
    ReflectAnswer,
    RetainAnswer,
    ConsolidateAnswer,
)

_R = TypeVar("_R", bound=ResponseModel)


def parse_response(model: type[_R], data: Any, operation: str) -> _R:
    """``data`` (decoded JSON) as ``model``, or a :class:`ProtocolError` naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        first = errors[0]
        where = "response" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise protocol_error(operation, where, first["msg"] + more) from None
