"""The check of Dreamer's Hindsight response models against an OpenAPI document, on a stored copy.

``tests/fixtures/hindsight_openapi_1.1.0.json`` is a 1.1.0 server's ``/openapi.json`` cut to the
endpoints the models answer and the schemas those reference (examples dropped). The same check runs
against the live test server in ``tests/integration/backends/hindsight/test_models.py``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.support.openapi_check import openapi_mismatches

SPEC: dict[str, Any] = json.loads(
    (Path(__file__).parents[3] / "fixtures" / "hindsight_openapi_1.1.0.json").read_text(encoding="utf-8")
)


def doctored() -> tuple[dict[str, Any], dict[str, Any]]:
    """A deep copy of the stored spec and its component schemas, to edit."""
    spec = copy.deepcopy(SPEC)
    return spec, spec["components"]["schemas"]


class TestOpenApiCheck:
    def test_models_match_the_stored_1_1_0_spec(self) -> None:
        """Every field the models read exists in 1.1.0's schemas with a compatible type."""
        assert openapi_mismatches(SPEC) == []

    def test_a_renamed_field_is_reported(self) -> None:
        """A field Dreamer reads that the server renamed is named in the report."""
        spec, schemas = doctored()
        props = schemas["BankListItem"]["properties"]
        props["facts"] = props.pop("fact_count")
        assert openapi_mismatches(spec) == [
            "BankPage.banks[].fact_count: Dreamer reads it but BankListItem has no such field"
        ]

    def test_a_renamed_top_level_field_is_reported(self) -> None:
        """Renaming a field of the response body itself (not a nested item) is caught too."""
        spec, schemas = doctored()
        props = schemas["RetainResponse"]["properties"]
        props["count"] = props.pop("items_count")
        schemas["RetainResponse"]["required"] = ["success", "bank_id", "count", "async"]
        assert any(p.startswith("RetainAnswer.items_count:") for p in openapi_mismatches(spec))

    def test_an_incompatible_type_is_reported(self) -> None:
        """A number the model reads that the server declares a string is a mismatch."""
        spec, schemas = doctored()
        schemas["RecallScores"]["properties"]["final"] = {"type": "string"}
        assert openapi_mismatches(spec) == [
            "RecallAnswer.results[].scores.final: the server may send string, the model reads number"
        ]

    def test_a_field_the_server_may_omit_is_reported_when_the_model_requires_it(self) -> None:
        """A required model field that the server stops requiring (and gives no default) is reported."""
        spec, schemas = doctored()
        schemas["ReflectFact"]["required"] = []
        assert openapi_mismatches(spec) == [
            "ReflectAnswer.based_on.memories[].text: the model requires it, ReflectFact may leave it out"
        ]

    def test_a_newly_nullable_field_is_reported(self) -> None:
        """A field the server may now send as null, which the model refuses, is reported."""
        spec, schemas = doctored()
        schemas["ConsolidationResponse"]["properties"]["operation_id"] = {
            "anyOf": [{"type": "string"}, {"type": "null"}]
        }
        assert openapi_mismatches(spec) == [
            "ConsolidateAnswer.operation_id: the server may send null, the model does not accept it"
        ]

    def test_a_missing_endpoint_is_reported(self) -> None:
        """A model whose endpoint is gone from the spec is reported by name."""
        spec, _ = doctored()
        del spec["paths"]["/v1/default/banks/{bank_id}/consolidate"]
        assert openapi_mismatches(spec) == [
            "ConsolidateAnswer: POST /v1/default/banks/{bank_id}/consolidate has no JSON 200 response "
            "in the spec"
        ]
