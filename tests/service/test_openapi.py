"""/openapi.json: generated from the registry (H1), guarded by a snapshot; fuzzed by
schemathesis in test_openapi_conformance.py (H4)."""

from __future__ import annotations

import json
import os

import pytest
from fastapi.testclient import TestClient
from paths import SNAPSHOTS

from glassllm.sandbox import registry as R
from glassllm_service.app import create_app

SNAPSHOT = SNAPSHOTS / "openapi.json"
APP = create_app()


def current() -> dict:
    with TestClient(APP) as c:
        return c.get("/openapi.json").json()


def test_openapi_has_one_post_per_op():
    doc = current()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    for name, op in R.OPS.items():
        post = paths[f"/api/v1/ops/{name}"]["post"]
        body = post["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/Run{name.title().replace('_', '')}Request"}
        schema = schemas[body["$ref"].rsplit("/", 1)[1]]
        assert set(schema["properties"]["inputs"]["properties"]) == {i.name for i in op.inputs}


def test_every_body_is_a_named_component():
    """Generators name their models after the components; an inline body
    becomes an anonymous or missing model."""
    doc = current()
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            bodies = [operation.get("requestBody", {}).get("content", {}),
                      *(r.get("content", {}) for r in operation["responses"].values())]
            for content in bodies:
                for media_type, media in content.items():
                    if media_type == "application/json":
                        assert set(media["schema"]) == {"$ref"}, (method, path)
    assert "$defs" not in json.dumps(doc)


def test_openapi_snapshot():
    """The API's shape changes only on purpose: GLASSLLM_UPDATE_SNAPSHOT=1 rewrites it."""
    text = json.dumps(current(), indent=1, sort_keys=True) + "\n"
    if os.environ.get("GLASSLLM_UPDATE_SNAPSHOT") or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), "API changed: review, then GLASSLLM_UPDATE_SNAPSHOT=1"


# schemathesis over every operation, on a real server, with its conformance checks (no
# 5xx, documented statuses, bodies, content types and headers): test_openapi_conformance.py


# --------------------------------------------------------------------------------------
# a document client generators read (glassllm_service/openapi.py), still exact
# --------------------------------------------------------------------------------------

def _validator(doc: dict, name: str):
    """A JSON Schema 2020-12 validator of the component `name`, its refs resolved in `doc`."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012
    registry = Registry().with_resource(
        "urn:doc", Resource.from_contents(doc, default_specification=DRAFT202012))
    return jsonschema.Draft202012Validator({"$ref": f"urn:doc#/components/schemas/{name}"},
                                           registry=registry)


def test_the_nonfinite_enum_lists_one_spelling_per_value_and_names_the_lenient_ones():
    schema = current()["components"]["schemas"]["NonFinite"]
    assert schema["enum"] == ["NaN", "Infinity", "-Infinity"]
    for lenient in ("nan", "inf", "-inf"):
        assert lenient in schema["description"]


def test_no_schema_refers_to_itself():
    """openapi-python-client cannot parse a recursive anyOf."""
    schemas = current()["components"]["schemas"]
    for name, schema in schemas.items():
        assert f'"#/components/schemas/{name}"' not in json.dumps(schema), name


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("FloatArray", [1.5, "NaN", "-Infinity", [1.0, "Infinity"], [[1.0], [2.0]],
                    [[[[[[[[0.5]]]]]]]]], ["nan?", [True], {"x": 1}, [["x"]]]),
    ("IntArray", [3, [1, 2], [[[[[[[[1]]]]]]]]], [1.5, [1.5], ["3"]]),
    ("BoolMask", [True, [False, True], [[[[[[[[True]]]]]]]]], [[1.5], "true"]),
])
def test_bounded_depth_array_schemas_accept_what_the_api_reads(name, good, bad):
    """Six named depths, then items: {} — every nested list the API reads still matches;
    values that no depth's leaves match are refused up to the sixth dimension."""
    validator = _validator(current(), name)
    for value in good:
        assert validator.is_valid(value), (name, value)
    for value in bad:
        assert not validator.is_valid(value), (name, value)


def test_operation_ids_are_unique_function_names():
    """A generator names each client function after its operationId: the route's own
    function name (`generate_unique_id_function`), never FastAPI's path-derived default."""
    ops = [(path, o["operationId"]) for path, item in current()["paths"].items()
           for o in item.values()]
    ids = [op_id for _, op_id in ops]
    assert len(ids) == len(set(ids))
    assert {"healthz", "list_ops", "get_op", "eval_expression", "run_softmax",
            "start_training", "model_attention"} <= set(ids)
    assert all(op_id.isidentifier() and "api_v1" not in op_id for op_id in ids), ids


def test_the_token_is_in_the_document_only_when_one_is_asked_for():
    """Every status a route sends, nothing else (test_openapi_conformance.py checks it on a
    real server): 401 and the malformed-Authorization 400 only with GLASSLLM_API_TOKEN, on
    every POST /api/v1/... and nowhere else; FastAPI's 422 HTTPValidationError never."""
    from glassllm_service.settings import Settings
    with TestClient(create_app(Settings(api_token="t0ken"))) as c:
        guarded = c.get("/openapi.json").json()
    plain = current()
    assert "HTTPValidationError" not in json.dumps(plain)
    assert "securitySchemes" not in plain["components"]
    assert guarded["components"]["securitySchemes"] == {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "GLASSLLM_API_TOKEN: every POST /api/v1/... needs it"}}
    for path, item in guarded["paths"].items():
        for method, operation in item.items():
            before = set(plain["paths"][path][method]["responses"])
            after = set(operation["responses"])
            if method == "post" and path.startswith("/api/v1/"):
                assert after == before | {"400", "401"}, path
                assert operation["security"] == [{"bearer": []}]
                assert operation["responses"]["401"]["headers"]["WWW-Authenticate"]["required"]
            else:
                assert after == before and "security" not in operation, path
