"""/openapi.json: FastAPI's document of the routes, one POST per op generated from the
registry (H1), in the form client generators read (docs/openapi-clients.md).

`install` makes ``app.openapi`` build the document once: FastAPI writes the routes'
operations; `op_paths` adds ``POST /api/v1/ops/<op>`` for every op of the registry, each
with its own request schema and example (one route runs them all:
`glassllm_service.routes.ops`); `describe_errors` lists exactly the statuses each
operation answers. `for_generators` then rewrites three things that the two most used
generators (openapi-python-client, openapi-typescript) cannot read, while the document
stays exact about what the API accepts:

- **enums with one spelling per value.** ``NonFinite`` lists the canonical spellings
  (``"NaN"``, ``"Infinity"``, ``"-Infinity"``, the ones the API writes); the lenient input
  spellings (``"nan"``, ``"inf"``, ``"-inf"``) are said in its description. ``NaN`` and
  ``nan`` are one identifier in a generated enum, and a duplicate stops the generator.
- **arrays as a bounded depth per dimension count.** A recursive schema (``FloatList``: a
  number or a list of ``FloatList``) becomes ``FloatList1D`` … ``FloatList6D`` (each a list
  of the one below) and ``FloatListDeep``: 7 levels of lists whose innermost ``items`` is
  ``{}``, for 7 or more dimensions, with the rule in its description. Every value the API
  reads still matches.
- **named component schemas for every body.** An inline request body becomes a component
  (its pydantic title, else ``<OperationId>Request``), pydantic's ``$defs`` join the
  components, and a response without a schema gets one.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from glassllm.sandbox import registry
from glassllm.sandbox.wire import NONFINITE_IN
from glassllm_service.schemas import (
    COMPONENTS,
    HEADERS,
    WHY,
    OpResult,
    op_error_statuses,
    request_schema,
)

MAX_LIST_DIMS = 6               # named nested-list depths; deeper lists: the *Deep schema
CANONICAL_NONFINITE = ["NaN", "Infinity", "-Infinity"]
REF = "#/components/schemas/"


def ref(name: str) -> dict:
    return {"$ref": REF + name}


def nonfinite_schema() -> dict:
    """The enum of the canonical non-finite spellings; the lenient ones in the text."""
    lenient = sorted(set(NONFINITE_IN) - set(CANONICAL_NONFINITE))
    return {"type": "string", "enum": CANONICAL_NONFINITE, "description": (
        "A non-finite float64 (H3). The API writes and this enum lists the canonical"
        " spellings NaN, Infinity, -Infinity; it also reads the lenient spellings "
        + ", ".join(lenient) + " (the same values).")}


def bounded_lists(schemas: dict[str, dict]) -> None:
    """Replace each recursive nested-list schema by one named schema per dimension count.

    A schema ``N = anyOf[leaf…, {type: array, items: $ref N}]`` becomes ``N = anyOf[leaf…,
    N1D, …, N{MAX_LIST_DIMS}D, NDeep]`` with ``N1D = array of leaf``, ``NkD = array of
    N(k-1)D`` and ``NDeep`` an array whose items are not described to the generator
    (``items: {}``; the description gives the rule)."""
    for name in list(schemas):
        schema = schemas[name]
        alts = schema.get("anyOf", [])
        self_lists = [a for a in alts if a.get("type") == "array"
                      and a.get("items") == ref(name)]
        if not self_lists:
            continue
        leaves = [a for a in alts if a not in self_lists]
        leaf = leaves[0] if len(leaves) == 1 else {"anyOf": leaves}
        below = leaf
        names = []
        for k in range(1, MAX_LIST_DIMS + 1):
            schemas[f"{name}{k}D"] = {"type": "array", "items": below,
                                      "description": f"{name} with {k} dimension{'s' * (k > 1)}"}
            below = ref(f"{name}{k}D")
            names.append(f"{name}{k}D")
        deep: dict = {"type": "array", "items": {}}     # 7 levels of lists, then not described
        for _ in range(MAX_LIST_DIMS):
            deep = {"type": "array", "items": deep}
        schemas[f"{name}Deep"] = {
            **deep,
            "description": f"{name} with more than {MAX_LIST_DIMS} dimensions: nested lists,"
                           " every list of one level the same length, every leaf as in"
                           f" {name}1D (the schema describes the lists down to the"
                           f" {MAX_LIST_DIMS + 1}th level, and the leaves no further)"}
        schemas[name] = {k: v for k, v in schema.items() if k != "anyOf"}
        schemas[name]["anyOf"] = [*leaves, *map(ref, names), ref(f"{name}Deep")]


def _pascal(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", text))


def _hoist_defs(schema: dict, schemas: dict[str, dict]) -> dict:
    """Move pydantic's ``$defs`` into the components and point the refs there."""
    for name, sub in schema.pop("$defs", {}).items():
        schemas.setdefault(name, _hoist_defs(sub, schemas))
    text = repr(schema)
    if "#/$defs/" not in text:
        return schema

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (v.replace("#/$defs/", REF) if k == "$ref" and isinstance(v, str)
                        else fix(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node
    return fix(schema)


def named_bodies(doc: dict) -> None:
    """Every request body and JSON response body a named component (``$ref``)."""
    schemas = doc["components"]["schemas"]
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            op_id = _pascal(operation.get("operationId") or f"{method} {path}")
            content = operation.get("requestBody", {}).get("content", {})
            for media in content.values():
                schema = media.get("schema")
                if schema is not None and "$ref" not in schema:
                    schema = _hoist_defs(schema, schemas)
                    name = schema.get("title") or f"{op_id}Request"
                    if name in schemas and schemas[name] != schema:
                        name = f"{op_id}Request"
                    schemas[name] = schema
                    media["schema"] = ref(name)
            for response in operation["responses"].values():
                content = response.get("content", {})
                if len(content) > 1 and content.get("application/json", {}).get("schema") == {}:
                    del content["application/json"]     # an event stream, not JSON
                media = content.get("application/json")
                if media is not None and media.get("schema") in (None, {}):
                    name = f"{op_id}Response"
                    schemas.setdefault(name, {"description": "any JSON value", "title": name})
                    media["schema"] = ref(name)


def shared_enums(schemas: dict[str, dict]) -> None:
    """A property enum that several bodies repeat (``encoding``: json | base64) becomes one
    component named after the property, so a client has one enum class, not one per body."""
    seen: dict[tuple[str, tuple], list[dict]] = {}
    for schema in schemas.values():
        for prop, sub in schema.get("properties", {}).items():
            if isinstance(sub, dict) and "enum" in sub and all(isinstance(v, str)
                                                                for v in sub["enum"]):
                seen.setdefault((prop, tuple(sub["enum"])), []).append(sub)
    for (prop, values), subs in seen.items():
        name = _pascal(prop)
        if len(subs) < 2 or name in schemas:
            continue
        schemas[name] = {"type": "string", "enum": list(values)}
        for sub in subs:
            del sub["enum"]
            sub.pop("type", None)
            sub["$ref"] = REF + name


def describe_errors(doc: dict, token: bool) -> None:
    """Every status an operation answers, and nothing else (H4, docs/http.md#openapi).

    FastAPI lists a 422 ``HTTPValidationError`` for every route with a path parameter;
    the sandbox validates by hand and answers its 422s in the error envelope, and a path
    parameter of type ``str`` never fails, so that 422 is never sent: it is dropped, and
    its schemas. With a token (`token`: GLASSLLM_API_TOKEN set), every ``POST /api/v1/...``
    also answers 401 (no or another token) and 400 (a malformed Authorization header),
    and says it takes a Bearer token (a security scheme)."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for item in doc["paths"].values():
        for operation in item.values():
            responses = operation.get("responses", {})
            for status, response in list(responses.items()):
                media = response.get("content", {}).get("application/json", {})
                if media.get("schema") == ref("HTTPValidationError"):
                    del responses[status]
    if "HTTPValidationError" not in repr(doc["paths"]):
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
    if not token:
        return
    doc["components"]["securitySchemes"] = {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "GLASSLLM_API_TOKEN: every POST /api/v1/... needs it"}}
    envelope = {"application/json": {"schema": ref("ErrorBody")}}
    malformed = ("a malformed Authorization header: no token, characters a token cannot hold,"
                 " the header twice (`invalid_authorization`)")
    for path, item in doc["paths"].items():
        operation = item.get("post")
        if operation is None or not path.startswith("/api/v1/"):
            continue
        operation["security"] = [{"bearer": []}]
        responses = operation["responses"]
        responses["401"] = {"description": "no Bearer token, another scheme, or not this"
                            " sandbox's token (`unauthorized`)", "headers": HEADERS[401],
                            "content": envelope}
        if "400" in responses:
            responses["400"]["description"] += "; or " + malformed
        else:
            responses["400"] = {"description": malformed, "content": envelope}
        operation["responses"] = dict(sorted(responses.items()))


def for_generators(doc: dict) -> dict:
    """The document FastAPI wrote, in the form client generators read (module docstring)."""
    doc = copy.deepcopy(doc)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    if "NonFinite" in schemas:
        schemas["NonFinite"] = nonfinite_schema()
    bounded_lists(schemas)
    named_bodies(doc)
    shared_enums(schemas)
    return doc


def operation_id(route: Any) -> str:
    """An operation's id is its route function's name: the generated clients' method names
    (``client.list_ops()``, ``client.eval_expression(...)``)."""
    return route.name


def op_paths() -> dict[str, dict]:
    """``POST /api/v1/ops/<op>`` for every op of the registry: its summary, request schema
    (`glassllm_service.schemas.request_schema`), first example and the error statuses it
    can answer. The app routes them all through one route (``/api/v1/ops/{name}``)."""
    paths = {}
    for op in registry.OPS.values():
        errors = {str(status): {"description": WHY[status], "content": {
            "application/json": {"schema": ref("ErrorBody")}}} for status in op_error_statuses(op)}
        for status, headers in HEADERS.items():
            if str(status) in errors:
                errors[str(status)]["headers"] = headers
        paths[f"/api/v1/ops/{op.name}"] = {"post": {
            "tags": ["ops"], "summary": op.summary, "operationId": f"run_{op.name}",
            "description": f"Runs `{op.module}.{op.name}` forward and backward (SPEC"
                           f" {op.clause}, H2).",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": request_schema(op),
                "example": op.examples[0].request() if op.examples else {"inputs": {}}}}},
            "responses": {"200": {"description": "Successful Response", "content": {
                "application/json": {"schema": ref("OpResult")}}}, **errors}}}
    return paths


def document(app: FastAPI, token: bool) -> dict:
    """The whole document: the app's routes, one POST per op, every error status."""
    # servers ".": relative to where the document is read, so Swagger UI's "Try it out"
    # calls the sandbox under whatever path prefix serves it (a JupyterHub proxy tile)
    doc = get_openapi(title=app.title, version=app.version, description=app.description,
                      routes=app.routes, servers=[{"url": "."}])
    doc["paths"].update(op_paths())
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    components.update(COMPONENTS)
    components["OpResult"] = OpResult.model_json_schema(mode="serialization",
                                                        ref_template=REF + "{model}")
    doc["info"]["x-ops"] = len(registry.OPS)
    describe_errors(doc, token=token)
    return for_generators(doc)


def without_rules(doc: dict, rules: dict[str, tuple[str, ...]]) -> dict:
    """`doc` with each op of `rules` (op → the open exercises hiding its backward rule,
    `glassllm_service.course_state.spread`) summarised without it: an op's summary may
    speak of its gradient (``cross_entropy_grad``'s is cross_entropy's rule). A copy;
    `doc` is not changed."""
    doc = copy.deepcopy(doc)
    for op, who in rules.items():
        post = doc["paths"].get(f"/api/v1/ops/{op}", {}).get("post")
        if post is not None:
            post["summary"] = (f"{op}: its description is not shown while exercise"
                               f" {', '.join(who)} is open (docs/modes.md)")
    return doc


def install(app: FastAPI, token: bool) -> None:
    """``app.openapi``: the document, built on the first ask and kept."""
    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = document(app, token)
        return app.openapi_schema

    app.openapi = openapi
