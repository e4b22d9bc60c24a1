"""/openapi.json: generated from the registry (H1), guarded by a snapshot, fuzzed by
schemathesis (no 5xx, H4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from glassllm import registry as R
from service.app import create_app

SNAPSHOT = Path(__file__).parent / "snapshots" / "openapi.json"
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
    """Issue 16: generators name their models after the components; an inline body
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


# A valid /api/v1/train body starts a real training run and streams it to the end; its
# refusals and its stream are tested in tests/test_train_api.py instead.
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).exclude(path="/api/v1/train")


@schema.parametrize()
@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@pytest.mark.slow
def test_schemathesis_no_server_errors(case):
    response = case.call()
    assert response.status_code < 500, response.text[:500]


# --------------------------------------------------------------------------------------
# issue 16: a document client generators read (service/openapi.py), still exact
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
    """openapi-python-client cannot parse a recursive anyOf (issue 16)."""
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
