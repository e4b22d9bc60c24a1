"""The API's shapes for OpenAPI (H1: generated from the registry, never written twice).

The POST bodies are parsed by `glassllm_service.codec`, not by pydantic (speed, H3); the models and
JSON schemas here document them, and the OpenAPI snapshot test guards them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from glassllm.sandbox.registry import Op
from glassllm.sandbox.wire import BASE64_DTYPES, NONFINITE_IN

NONFINITE = {"type": "string", "enum": sorted(NONFINITE_IN)}

# JSON schemas of the input kinds of glassllm.sandbox.wire; FloatArray and friends are recursive.
COMPONENTS: dict[str, dict] = {
    "NonFinite": NONFINITE,
    "Float": {"anyOf": [{"type": "number"}, {"$ref": "#/components/schemas/NonFinite"}]},
    "Base64Array": {
        "description": "an exact binary array: the little-endian bytes of the array"
                       " in C order, base64-encoded; prod(shape) * itemsize bytes",
        "type": "object", "required": ["dtype", "shape", "base64"],
        "additionalProperties": False, "properties": {
            "dtype": {"enum": sorted(BASE64_DTYPES)},
            "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            "base64": {"type": "string", "contentEncoding": "base64"}}},
    "FloatList": {"description": "float64: a number, a non-finite token, or nested lists",
                  "anyOf": [{"$ref": "#/components/schemas/Float"},
                            {"type": "array",
                             "items": {"$ref": "#/components/schemas/FloatList"}}]},
    "FloatArray": {"description": "float64: nested lists (FloatList) or a binary array"
                                  " (Base64Array, dtype float64 or float32)",
                   "anyOf": [{"$ref": "#/components/schemas/FloatList"},
                             {"$ref": "#/components/schemas/Base64Array"}]},
    "IntList": {"description": "integers or nested lists of integers (1.5, true, \"3\" refused)",
                "anyOf": [{"type": "integer"},
                          {"type": "array", "items": {"$ref": "#/components/schemas/IntList"}}]},
    "IntArray": {"description": "nested lists (IntList) or a binary array (Base64Array, dtype"
                                " int64 or int32)",
                 "anyOf": [{"$ref": "#/components/schemas/IntList"},
                           {"$ref": "#/components/schemas/Base64Array"}]},
    "BoolList": {"description": "booleans or nested lists of booleans (0 / 1 accepted)",
                 "anyOf": [{"type": "boolean"},
                           {"type": "array", "items": {"$ref": "#/components/schemas/BoolList"}}]},
    "BoolMask": {"description": "nested lists (BoolList) or a binary array (Base64Array, dtype"
                                " bool: one byte 0 or 1 per element)",
                 "anyOf": [{"$ref": "#/components/schemas/BoolList"},
                           {"$ref": "#/components/schemas/Base64Array"}]},
    "IndexItem": {"anyOf": [{"type": "integer"}, {"type": "null"}, {"const": "..."},
                            {"type": "object", "additionalProperties": False, "properties": {
                                "start": {"type": ["integer", "null"]},
                                "stop": {"type": ["integer", "null"]},
                                "step": {"type": ["integer", "null"]}}},
                            {"type": "object", "required": ["array"], "additionalProperties": False,
                             "properties": {"array": {"$ref": "#/components/schemas/IntArray"}}},
                            {"type": "object", "required": ["mask"], "additionalProperties": False,
                             "properties": {"mask": {"$ref": "#/components/schemas/BoolMask"}}}]},
}

KIND_SCHEMAS: dict[str, dict] = {
    "tensor": {"$ref": "#/components/schemas/FloatArray"},
    "array": {"$ref": "#/components/schemas/FloatArray"},
    "table": {"$ref": "#/components/schemas/FloatArray"},
    "int_array": {"$ref": "#/components/schemas/IntArray"},
    "bool_mask": {"$ref": "#/components/schemas/BoolMask"},
    "number": {"$ref": "#/components/schemas/Float"},
    "int": {"type": "integer"},
    "bool": {"type": "boolean"},
    "axis": {"anyOf": [{"type": "null"}, {"type": "integer"},
                       {"type": "array", "items": {"type": "integer"}}]},
    "axes": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "integer"}}]},
    "shape": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}}]},
    "index": {"anyOf": [{"$ref": "#/components/schemas/IndexItem"},
                        {"type": "array", "items": {"$ref": "#/components/schemas/IndexItem"}}]},
}


def request_schema(op: Op) -> dict:
    """The JSON schema of ``POST /api/v1/ops/{op.name}``'s body, from the registry."""
    inputs = {i.name: {**KIND_SCHEMAS[i.kind], "description": f"{i.kind}: {i.doc}"}
              for i in op.inputs}
    body: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["inputs"],
        "properties": {
            "inputs": {"type": "object", "additionalProperties": False, "properties": inputs,
                       "required": [i.name for i in op.inputs if i.required]},
        },
    }
    if op.output == "tensor":
        body["properties"]["requires_grad"] = {
            "anyOf": [{"type": "null"},
                      {"type": "array", "items": {"enum": list(op.differentiable)}}],
            "description": "inputs to differentiate; default: every differentiable input"}
        body["properties"]["grad_output"] = {
            "anyOf": [{"type": "null"}, {"$ref": "#/components/schemas/FloatArray"}],
            "description": "the incoming gradient, shaped like the output; default: ones"}
    body["properties"]["encoding"] = {
        "enum": ["json", "base64"], "default": "json",
        "description": "how the answer's arrays travel: nested lists, or Base64Array"}
    return body


class InputInfo(BaseModel):
    name: str
    kind: str
    dtype: str | None
    array: bool = Field(description="the value is an array (nested lists), not a scalar")
    differentiable: bool
    required: bool
    default: Any = None
    shape: str | None = None
    doc: str


class ExampleInfo(BaseModel):
    title: str
    clause: str | None
    request: dict[str, Any]
    expected: dict[str, Any]


class OutputInfo(BaseModel):
    name: str = Field(description="where it is in the result: 'value' or 'grads.<input>'")
    role: str = Field(description="'value', 'loss' (a scalar to minimise) or 'grad'")
    kind: str = Field(description="'tensor' or 'ndarray' (L0.2)")
    of: str | None = Field(None, description="for a grad: the input it is the gradient of")


class OpInfo(BaseModel):
    name: str
    summary: str
    clause: str
    module: str
    output: str = Field(description="'tensor' (value and grads) or 'ndarray' (value only)")
    outputs: list[OutputInfo]
    role: str = Field(description="'probability' (every element in [0, 1]) or 'value'")
    inputs: list[InputInfo]
    examples: list[ExampleInfo]
    vjp: dict[str, str] = Field(
        description="the backward rule per differentiable input (g: incoming gradient, out:"
                    " result), the Backward: block of the op's docstring; empty while an"
                    " open exercise hides it (course mode)")
    hidden_by: dict[str, list[str]] | None = Field(
        None, description="course mode: {part: [exercise ids]} hiding part of this op now")
    symbol: str | None = Field(description="how a formula writes the op (× @ Σ), if it has a sign")
    sum_invariant: str | None = Field(
        description="why the gradient of the output's sum is zero for every input, if it is")


class OpList(BaseModel):
    ops: list[OpInfo]
    kinds: dict[str, str | None] = Field(
        description="every input kind and the dtype it is read as (null: not an array)")


class Computed(BaseModel):
    """What every compute route answers; arrays in the wire format (H3)."""

    value: Any = Field(description="a JSON number for a 0-d output, else nested lists; a"
                                   " Base64Array with \"encoding\": \"base64\"")
    shape: list[int]
    grads: dict[str, Any] = Field(description="one array per input that requires grad")
    warnings: list[str]


class OpResult(Computed):
    """The answer of ``POST /api/v1/ops/{name}`` (H2)."""

    op: str


class ErrorDetail(BaseModel):
    status: int
    code: str
    message: str
    op: str | None = Field(None, description="the op the request ran, if any")
    input: str | None = Field(None, description="the input or request field to fix")


class ErrorBody(BaseModel):
    error: ErrorDetail


# Each error status an operation can answer, documented with the error envelope (H4) and
# the headers that come with it: /openapi.json lists exactly the statuses a route sends.
# `glassllm_service.openapi.describe_errors` adds 401 and 400 where a token is asked for.
WHY = {
    400: "the shapes or values break the op's rule (`shape_error`, `numpy_error`,"
         " `invalid_value`)",
    401: "no Bearer token, or not this sandbox's (`unauthorized`; GLASSLLM_API_TOKEN)",
    403: "course mode: what an open exercise hides (`hidden_by_exercise`), an exercise not"
         " open or closed, every attempt used, a route off in a graded session"
         " (`off_in_graded_session`); training turned off by the operator (`training_off`)",
    404: "no such name (`unknown_op`, `not_found`)",
    409: "a request out of order (`hint_out_of_order`)",
    413: "a size limit: the body, an array, a result, the planned work (`body_too_large`,"
         " `too_large`, ...)",
    415: "the body is not UTF-8 JSON, or is compressed (`unsupported_media_type`)",
    416: "no requested byte range starts inside the file (`range_not_satisfiable`)",
    422: "the body is not a valid request: its JSON, a field, an input, a rule"
         " (`invalid_request`, `invalid_input`, ...)",
    503: "every compute slot is busy and the queue is full, or the wait ran out"
         " (`queue_full`, `queue_timeout`)",
    507: "the disk cannot hold what the answer needs (`insufficient_storage`,"
         " `storage_unavailable`)",
}
_STRING = {"type": "string"}
HEADERS = {
    401: {"WWW-Authenticate": {"required": True, "schema": _STRING, "description":
                               'the challenge: Bearer realm="glassllm", with error='
                               '"invalid_token" for a token that does not match'}},
    416: {"Content-Range": {"required": True, "schema": _STRING,
                            "description": "bytes */<size of the file>"}},
    503: {"Retry-After": {"required": True, "schema": _STRING,
                          "description": "seconds to wait before trying again"}},
}


# The 503 of a route that reads or writes the class record (course mode).
RECORD_DOWN = ("the class record's database is not answering (`record_unavailable`, with"
               " Retry-After); nothing was recorded")


def error_responses(*statuses: int, why: dict[int, str] | None = None) -> dict[int, dict]:
    """FastAPI ``responses=`` for these error statuses: each the error envelope
    (`ErrorBody`), a description (`WHY`, or `why` for this route) and its headers."""
    out: dict[int, dict] = {}
    for status in sorted(statuses):
        out[status] = {"model": ErrorBody,
                       "description": (why or {}).get(status, WHY[status])}
        if status in HEADERS:
            out[status]["headers"] = HEADERS[status]
    return out


def op_error_statuses(op: Op) -> tuple[int, ...]:
    """The error statuses ``POST /api/v1/ops/<op>`` can answer: the body's (413, 415,
    422), the queue's (503), and 400 unless the op's plan cannot refuse a shape (an
    elementwise op of one tensor, glassllm/sandbox/registry/plans.py ``same_as``)."""
    refuses = getattr(op.plan, "may_refuse", True)
    return (400, 413, 415, 422, 503) if refuses else (413, 415, 422, 503)


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    ops: int
    busy: int = Field(description="compute slots in use in this worker process")
    capacity: int = Field(description="compute slots of this worker process")
    waiting: int = Field(description="requests of this worker waiting for a slot")
    record: str | None = Field(None, description="course mode with a record: its database,"
                               " `ok` or why not (the sandbox stays ready without it)")


class BatchResult(BaseModel):
    """``POST /api/v1/batch``: one answer per case, in order: a result or ``{"error"}``."""

    results: list[dict[str, Any]]


class TorchScript(BaseModel):
    """``POST /api/v1/torch``: the case as a PyTorch script (docs/notebooks.md)."""

    script: str = Field(description="Python source: the case in PyTorch, glassllm's numbers"
                                    " and a table of exact / close / max diff per tensor")
    filename: str


class CheckResult(BaseModel):
    """``POST /api/v1/check``: a report per claimed array (`glassllm.sandbox.compare.compare`)."""

    passed: bool
    value: dict[str, Any] | None
    grads: dict[str, dict[str, Any]]
    rtol: float
    atol: float
    digits: int | None = Field(None, description="when asked for: the significant digits"
                                                 " every element must agree to")
    reveal: bool
    warnings: list[str]


class EvalResult(Computed):
    """The answer of ``POST /api/v1/eval`` (H2, H3)."""

    grads: dict[str, Any] = Field(description="one array per variable that requires grad")
    output: int = Field(description="the id of the output node")
    nodes: list[dict[str, Any]] = Field(
        description="in evaluation order: id, op, span [start, end), text, inputs (node ids),"
                    " shape, requires_grad, value, grad (the adjoint ∂out/∂node), ledger"
                    " ([{input, summed_axes}]: axes summed to undo broadcasting); variables"
                    " also have name and kind; with expand, a composite op's node has"
                    " expansion: {expression, value, grads, nodes, ...}")
    first_nonfinite: dict[str, Any] | None = Field(
        description="{node, pass: forward | backward, count} of the first non-finite node")
    check: dict[str, Any] | None = Field(
        description="with check: per variable analytic, numeric, max_abs_err, max_rel_err,"
                    " passed; with check's modes: float32, passed, note and one report per"
                    " mode (finite_differences, taylor, adjoint, eps_sweep)")
    paths: list[dict[str, Any]] | None = Field(
        default=None,
        description="with paths only: [{node, edges: [{consumer, input, slot, grad, norm,"
                    " share, heads?}]}], each shared node's gradient split by the op inputs"
                    " that read it")
    dead: list[dict[str, Any]] | None = Field(
        default=None,
        description="with dead only: [{variable, node, shape, dead, size, missing, rows,"
                    " causes: [{reason, words, op, node, elements, units}]}], each variable"
                    " whose gradient is missing or dead, why, and the node that cut it")


class MysteryList(BaseModel):
    mysteries: list[dict[str, Any]] = Field(description="[{id, title, points}]")


class MysteryView(BaseModel):
    """One mystery as a student sees it: never its bug, nor the pool it is drawn from."""

    id: str
    kind: str = Field(description='"mystery"')
    title: str
    text: str
    points: float
    expression: str = Field(description="the case: an expression of registry ops")
    variables: dict[str, Any] = Field(description="the case's numbers, as eval's variables")


class MysteryProof(BaseModel):
    """A proof graded: half the points for the node, half for the input."""

    mystery: str
    node_right: bool = Field(description="the named node's op has the wrong backward")
    input_exposes: bool = Field(description="the Taylor test of the case fails at the input"
                                            " under the bug and passes under the real rules")
    score: float
    points: float
    orders: dict[str, Any] = Field(description="{bug, real}: the Taylor orders at the input")
    message: str = Field(description="the grade in words")


class HiddenExercise(BaseModel):
    """An exercise that hides something, and what."""

    id: str
    title: str
    state: str = Field(description="'open', 'not open yet' or 'closed' at the moment asked")
    hiding: bool = Field(description="it hides its parts at that moment (course mode, open)")
    opens: str | None = Field(description="ISO 8601; null: always")
    closes: str | None = Field(description="ISO 8601, when its hiding ends; null: never")
    hide: list[str] = Field(description="the parts: rule, steps, graph_grads, expected,"
                                        " finite_differences")
    hide_ops: list[str] = Field(description="the registry ops whose parts it hides")
    reaches: list[str] = Field(description="every op that runs one of them (its closure"
                                           " holds it): the requests hiding refuses or trims")


class HiddenReport(BaseModel):
    """``GET /api/v1/hidden``: what the course's exercises hide at a moment, and why."""

    at: str = Field(description="the moment asked (ISO 8601, UTC)")
    mode: str
    hiding: bool = Field(description="anything is hidden at that moment")
    ops: dict[str, dict[str, list[str]]] = Field(
        description="op → part → the open exercises hiding it")
    exercises: list[HiddenExercise]


class ExampleList(BaseModel):
    examples: list[dict[str, Any]]


class LessonList(BaseModel):
    lessons: list[dict[str, Any]]


class AttentionResult(BaseModel):
    """``POST /api/v1/model/attention``: per layer and head, P and ∂loss/∂P (L, H, n, n)."""

    tokens: list[str] = Field(description="the prompt's n bytes as labels (\\xNN when not"
                                          " printable ASCII)")
    ids: list[int] = Field(description="the prompt's n byte ids")
    loss: float | None = Field(description="mean next-token cross-entropy of the prompt;"
                                           " null when not finite")
    shape: list[int] = Field(description="[L, H, n, n]")
    probs: list[list[list[list[float]]]] = Field(description="attention probabilities")
    grads: list[list[list[list[float]]]] = Field(description="∂loss/∂probs")
