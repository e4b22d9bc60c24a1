"""Every limit of the sandbox at its boundary (SPEC H5): a request exactly
at the limit is answered, one unit over is refused with the documented status, a code,
the input it concerns, and a message that names the limit.

A test far over a limit lets an off-by-one (``>=`` for ``>``, ``limit + 1``) through; these
pin the comparison itself. Every request goes through the public HTTP API (TestClient) or
the public `glassllm.sandbox.expr.evaluate`, so refactors of the internals keep them valid.
"""

from __future__ import annotations

import base64

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox.expr import ExprError, Limits, evaluate
from glassllm_service.app import create_app
from glassllm_service.http_errors import status_of
from glassllm_service.settings import Settings

JSON = {"Content-Type": "application/json"}


def client_with(**settings) -> TestClient:
    return TestClient(create_app(Settings(**settings)))


def post(client: TestClient, path: str, body: dict | bytes):
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.post(path, content=content, headers=JSON)


def refused(r, status: int, code: str, input: str, *words: str) -> dict:
    assert r.status_code == status, r.text[:400]
    err = r.json()["error"]
    assert err["status"] == status and err["code"] == code and err["input"] == input, err
    for word in words:
        assert word in err["message"], (word, err["message"])
    return err


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_BODY_BYTES (413 while reading)
# --------------------------------------------------------------------------------------

BODY = b'{"inputs": {"a": [1.0, -2.0]}}'


def padded(size: int) -> bytes:
    """The same valid request padded with trailing whitespace to exactly `size` bytes."""
    assert size >= len(BODY)
    return BODY + b" " * (size - len(BODY))


@pytest.mark.parametrize("limit", [len(BODY), 1000, 4096])
def test_a_body_of_exactly_max_body_bytes_is_accepted_and_one_more_is_413(limit):
    with client_with(max_body_bytes=limit) as c:
        at = post(c, "/api/v1/ops/neg", padded(limit))
        assert at.status_code == 200, at.text[:300]
        assert at.json()["value"] == [-1.0, 2.0]
        over = post(c, "/api/v1/ops/neg", padded(limit + 1))
    refused(over, 413, "body_too_large", "request body", f"exceeds {limit} bytes",
            "GLASSLLM_MAX_BODY_BYTES")
    assert over.json()["error"]["op"] == "neg"


def test_the_streamed_body_limit_is_exact_too():
    """Without Content-Length (chunked) the size is counted while reading: same boundary."""
    limit = 300

    def chunks(body: bytes):
        for i in range(0, len(body), 7):
            yield body[i:i + 7]

    with client_with(max_body_bytes=limit) as c:
        at = c.post("/api/v1/ops/neg", content=chunks(padded(limit)), headers=JSON)
        over = c.post("/api/v1/ops/neg", content=chunks(padded(limit + 1)), headers=JSON)
    assert at.status_code == 200, at.text[:300]
    refused(over, 413, "body_too_large", "request body", "GLASSLLM_MAX_BODY_BYTES")


def test_the_eval_route_has_the_same_body_boundary():
    body = orjson.dumps({"expression": "x * 2", "variables": {"x": [1.5]}})
    limit = len(body) + 10
    with client_with(max_body_bytes=limit) as c:
        at = post(c, "/api/v1/eval", body + b" " * 10)
        over = post(c, "/api/v1/eval", body + b" " * 11)
    assert at.status_code == 200 and at.json()["value"] == [3.0]
    refused(over, 413, "body_too_large", "request body", "GLASSLLM_MAX_BODY_BYTES")


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_JSON_DEPTH (422 before parsing)
# --------------------------------------------------------------------------------------

def nested(depth: int) -> list:
    """A 1-element array nested `depth` lists deep: [[[1.0]]] for 3."""
    value: object = 1.0
    for _ in range(depth):
        value = [value]
    return value  # type: ignore[return-value]


@pytest.mark.parametrize("limit", [3, 6, 32])
def test_a_body_exactly_max_json_depth_deep_is_accepted_and_one_deeper_is_422(limit):
    # {"inputs": {"a": ...}} sits at depth 2, so the array may be limit - 2 lists deep
    with client_with(max_json_depth=limit) as c:
        at = post(c, "/api/v1/ops/neg", {"inputs": {"a": nested(limit - 2)}})
        over = post(c, "/api/v1/ops/neg", {"inputs": {"a": nested(limit - 1)}})
    assert at.status_code == 200, at.text[:300]
    assert at.json()["shape"] == [1] * (limit - 2)
    refused(over, 422, "too_deep", "request body", f"depth {limit + 1} exceeds {limit}",
            "GLASSLLM_MAX_JSON_DEPTH")


def test_brackets_inside_strings_do_not_count_towards_the_depth():
    """A string of brackets is one value at its own depth: the tensor refuses it by name
    (422 invalid_input), the depth check does not (nor does an escaped quote fool it)."""
    with client_with(max_json_depth=3) as c:
        r = post(c, "/api/v1/ops/neg", b'{"inputs": {"a": "[[[[[[\\"[[[[{{{{"}}')
        deep = post(c, "/api/v1/ops/neg", b'{"inputs": {"a": [[["\\"]"]]]}}')
    err = refused(r, 422, "invalid_input", "a")
    assert "must be a number" in err["message"]
    refused(deep, 422, "too_deep", "request body", "depth 5 exceeds 3")


def test_bodies_without_json_arrays_keep_every_depth_and_bool_rule():
    """H5: a body whose arrays are all binary skips the byte scans, so the
    walk over the parsed objects must refuse what the scans refused: objects too deep,
    a bool where a number belongs, and nesting past the parser's own limit (1024)."""
    b64 = {"dtype": "float64", "shape": [2], "base64": "AAAAAAAA8D8AAAAAAAAAQA=="}
    with client_with(max_json_depth=4) as c:
        ok = post(c, "/api/v1/ops/neg", {"inputs": {"a": b64}})
        deep = post(c, "/api/v1/ops/neg", {"inputs": {"a": {"x": {"y": {"z": 1}}}}})
        flag = post(c, "/api/v1/ops/neg", {"inputs": {"a": True}})
        past = post(c, "/api/v1/ops/neg", b'{"a":' * 1100 + b"1" + b"}" * 1100)
    assert ok.status_code == 200 and ok.json()["value"] == [-1.0, -2.0]
    refused(deep, 422, "too_deep", "request body", "depth 5 exceeds 4")
    refused(flag, 422, "invalid_input", "a")
    refused(past, 422, "too_deep", "request body", "depth 1100 exceeds 4")


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_ARRAY_ELEMENTS (413, one input)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [1, 6, 1000])
def test_an_input_of_exactly_max_array_elements_is_accepted_and_one_more_is_413(limit):
    with client_with(max_array_elements=limit) as c:
        at = post(c, "/api/v1/ops/neg", {"inputs": {"a": [0.5] * limit}})
        over = post(c, "/api/v1/ops/neg", {"inputs": {"a": [0.5] * (limit + 1)}})
    assert at.status_code == 200 and at.json()["shape"] == [limit]
    refused(over, 413, "too_large", "a", f"has {limit + 1} elements; the limit is {limit}")


def test_the_array_limit_holds_for_integer_and_mask_inputs():
    with client_with(max_array_elements=3) as c:
        ids_at = post(c, "/api/v1/ops/embedding",
                      {"inputs": {"weight": [[1.0], [2.0]], "ids": [0, 1, 0]}})
        ids_over = post(c, "/api/v1/ops/embedding",
                        {"inputs": {"weight": [[1.0], [2.0]], "ids": [0, 1, 0, 1]}})
        mask_over = post(c, "/api/v1/ops/masked_fill",
                         {"inputs": {"a": [1.0], "mask": [True] * 4, "value": 0.0}})
    assert ids_at.status_code == 200 and ids_at.json()["value"] == [[1.0], [2.0], [1.0]]
    refused(ids_over, 413, "too_large", "ids", "has 4 elements; the limit is 3")
    refused(mask_over, 413, "too_large", "mask", "has 4 elements; the limit is 3")


def test_the_eval_route_holds_variables_to_the_array_limit():
    with client_with(max_array_elements=4) as c:
        at = post(c, "/api/v1/eval", {"expression": "x * 1", "variables": {"x": [1.0] * 4}})
        over = post(c, "/api/v1/eval", {"expression": "x * 1", "variables": {"x": [1.0] * 5}})
    assert at.status_code == 200, at.text[:300]
    err = refused(over, 413, "too_large", "variables.x", "the limit is 4")
    assert "5" in err["message"]


def _b64(dtype: str, shape: list[int], fill: int = 0) -> dict:
    """A binary array of `shape` whose every byte is `fill` (int64 zeros, or bool masks)."""
    itemsize = {"int64": 8, "int32": 4, "bool": 1}[dtype]
    raw = bytes([fill]) * (itemsize * int(np.prod(shape)))
    return {"dtype": dtype, "shape": shape, "base64": base64.b64encode(raw).decode()}


A6 = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("encode", ["json", "base64"])
def test_getitem_index_arrays_are_held_to_max_array_elements(encode):
    """H5: an index array of getitem (``{"array": ...}`` or ``{"mask": ...}``) is an array
    input like any other: exactly the limit is answered, one more is 413 naming `index`."""
    limit = 6

    def ids(n):
        return [0] * n if encode == "json" else _b64("int64", [n])

    def mask(n):
        return [True] * n if encode == "json" else _b64("bool", [n], 1)

    with client_with(max_array_elements=limit) as c:
        at = post(c, "/api/v1/ops/getitem", {"inputs": {"a": A6, "index": {"array": ids(6)}}})
        over = post(c, "/api/v1/ops/getitem", {"inputs": {"a": A6, "index": {"array": ids(7)}}})
        in_tuple = post(c, "/api/v1/ops/getitem",
                        {"inputs": {"a": A6, "index": [{"start": 0}, {"array": ids(7)}]}})
        mask_at = post(c, "/api/v1/ops/getitem", {"inputs": {"a": A6, "index": {"mask": mask(6)}}})
        mask_over = post(c, "/api/v1/ops/getitem",
                         {"inputs": {"a": A6, "index": {"mask": mask(7)}}})
    assert at.status_code == 200, at.text[:300]
    assert at.json()["value"] == [0.0] * 6 and at.json()["grads"]["a"] == [6.0] + [0.0] * 5
    assert mask_at.status_code == 200 and mask_at.json()["value"] == A6
    refused(over, 413, "too_large", "index", "has 7 elements", "the limit is 6")
    refused(mask_over, 413, "too_large", "index", "has 7 elements", "the limit is 6")
    refused(in_tuple, 413, "too_large", "index", "the limit is 6")


def test_a_binary_index_array_is_refused_from_its_declared_shape_before_decoding():
    """H5: the 413 comes from ``shape`` alone — the text is neither decoded nor even checked
    (a bogus 4-character text for 6 000 000 elements is still the 413, not a 422)."""
    with client_with(max_array_elements=1000) as c:
        for key, dtype in (("mask", "bool"), ("array", "int64")):
            body = {"inputs": {"a": A6, "index": {key: {"dtype": dtype, "shape": [6_000_000],
                                                         "base64": "AAAA"}}}}
            r = post(c, "/api/v1/ops/getitem", body)
            refused(r, 413, "too_large", "index", "has 6000000 elements (shape [6000000])",
                    "the limit is 1000")


def test_the_default_index_limit_refuses_two_million_zeros():
    """H5 at the default GLASSLLM_MAX_ARRAY_ELEMENTS (1 000 000): the tester's 2M-element
    JSON index array was answered with a 2M-element result; now it is a 413 naming index."""
    with client_with() as c:
        r = post(c, "/api/v1/ops/getitem",
                 {"inputs": {"a": A6, "index": {"array": [0] * 2_000_000}}})
    refused(r, 413, "too_large", "index", "has 2000000 elements", "the limit is 1000000")


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_RESULT_ELEMENTS (413, from shapes)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [12, 100])
def test_a_result_of_exactly_max_result_elements_is_accepted_and_one_more_is_413(limit):
    # a (limit, 1) + b (1, 1) broadcasts to `limit` elements; (limit + 1, 1) to one more
    with client_with(max_result_elements=limit) as c:
        at = post(c, "/api/v1/ops/add", {"inputs": {"a": [[1.0]] * limit, "b": [[2.0]]}})
        over = post(c, "/api/v1/ops/add",
                    {"inputs": {"a": [[1.0]] * (limit + 1), "b": [[2.0]]}})
    assert at.status_code == 200 and at.json()["shape"] == [limit, 1]
    refused(over, 413, "too_large", "a, b",
            f"would produce {limit + 1} elements; the limit is {limit}")


def test_a_broadcast_result_is_counted_not_its_inputs():
    # 3 + 4 input elements broadcast to 12: refused at 11, answered at 12
    body = {"inputs": {"a": [[1.0], [2.0], [3.0]], "b": [[1.0, 2.0, 3.0, 4.0]]}}
    with client_with(max_result_elements=11) as c:
        refused(post(c, "/api/v1/ops/mul", body), 413, "too_large", "a, b",
                "would produce 12 elements; the limit is 11")
    with client_with(max_result_elements=12) as c:
        assert post(c, "/api/v1/ops/mul", body).status_code == 200


def test_the_eval_route_holds_all_nodes_together_to_the_result_limit():
    """x (5), y (2) and x + y (10): 17 elements in all, each node sent back."""
    body = {"expression": "x + y", "variables": {"x": [[1.0]] * 5, "y": [[1.0, 2.0]]}}
    with client_with(max_result_elements=17) as c:
        at = post(c, "/api/v1/eval", body)
    with client_with(max_result_elements=16) as c:
        over = post(c, "/api/v1/eval", body)
    assert at.status_code == 200 and at.json()["shape"] == [5, 2]
    assert over.status_code == 413 and over.json()["error"]["code"] == "too_large"
    assert "16" in over.json()["error"]["message"]


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_MATMUL_MADDS (413, forward + backward)
# --------------------------------------------------------------------------------------

MATMUL = {"inputs": {"a": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
                     "b": [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]]}}
# (2, 3) @ (3, 4): 24 multiply-adds forward; the backward's two matmuls take 24 each
MATMUL_MADDS = 3 * 2 * 3 * 4


def test_a_matmul_of_exactly_max_matmul_madds_is_accepted_and_one_fewer_allowed_is_413():
    with client_with(max_matmul_madds=MATMUL_MADDS) as c:
        at = post(c, "/api/v1/ops/matmul", MATMUL)
    with client_with(max_matmul_madds=MATMUL_MADDS - 1) as c:
        over = post(c, "/api/v1/ops/matmul", MATMUL)
    assert at.status_code == 200, at.text[:300]
    assert at.json()["value"] == [[1.0, 2.0, 3.0, 6.0], [4.0, 5.0, 6.0, 15.0]]
    refused(over, 413, "too_large", "a, b",
            f"matmul would take {MATMUL_MADDS} multiply-adds; the limit is {MATMUL_MADDS - 1}")


def test_the_eval_route_counts_the_same_multiply_adds():
    body = {"expression": "a @ b", "variables": MATMUL["inputs"]}
    with client_with(max_matmul_madds=MATMUL_MADDS) as c:
        at = post(c, "/api/v1/eval", body)
    with client_with(max_matmul_madds=MATMUL_MADDS - 1) as c:
        over = post(c, "/api/v1/eval", body)
    assert at.status_code == 200, at.text[:300]
    assert over.status_code == 413 and over.json()["error"]["code"] == "too_large"
    assert str(MATMUL_MADDS) in over.json()["error"]["message"]


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_EXPRESSION_LENGTH (422), node count and depth of an expression (422)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [5, 40, 2000])
def test_an_expression_of_exactly_max_expression_length_is_accepted_and_one_more_is_422(limit):
    expression = "x * 2" + " " * (limit - 5)
    with client_with(max_expression_length=limit) as c:
        at = post(c, "/api/v1/eval", {"expression": expression, "variables": {"x": [1.0]}})
        over = post(c, "/api/v1/eval",
                    {"expression": expression + " ", "variables": {"x": [1.0]}})
    assert at.status_code == 200 and at.json()["value"] == [2.0]
    refused(over, 422, "expression_too_long", "expression",
            f"has {limit + 1} characters; the limit is {limit}")


def chain(n: int) -> str:
    """x + x + ... with n additions: n + 1 variable reads and n add nodes."""
    return " + ".join(["x"] * (n + 1))


def count_nodes(expression: str) -> int:
    return len(evaluate(expression, {"x": [1.0]})["nodes"])


@pytest.mark.parametrize("n", [1, 5, 30])
def test_an_expression_of_exactly_max_nodes_nodes_is_evaluated_and_one_more_refused(n):
    expression = chain(n)
    nodes = count_nodes(expression)
    assert nodes >= n + 1
    at = evaluate(expression, {"x": [1.0]}, limits=Limits(max_nodes=nodes))
    assert at["value"] == [float(n + 1)]
    with pytest.raises(ExprError) as err:
        evaluate(expression, {"x": [1.0]}, limits=Limits(max_nodes=nodes - 1))
    assert status_of(err.value) == 422 and err.value.code == "too_many_nodes"
    assert f"more than {nodes - 1} nodes" in err.value.message


def test_bracket_depth_of_exactly_max_depth_is_parsed_and_one_more_refused():
    expression = "(" * 4 + "x" + ")" * 4
    assert evaluate(expression, {"x": [3.0]}, limits=Limits(max_depth=4))["value"] == [3.0]
    with pytest.raises(ExprError) as err:
        evaluate(expression, {"x": [3.0]}, limits=Limits(max_depth=3))
    assert status_of(err.value) == 422 and err.value.code == "too_deep"
    assert "deeper than 3" in err.value.message and err.value.position == 3


def test_graph_elements_of_exactly_max_graph_elements_are_evaluated_and_one_more_refused():
    # x (4) and x * x (4): 8 elements in all
    expression = "x * x"
    ok = evaluate(expression, {"x": [1.0, 2.0, 3.0, 4.0]},
                  limits=Limits(max_graph_elements=8))
    assert ok["value"] == [1.0, 4.0, 9.0, 16.0]
    with pytest.raises(ExprError) as err:
        evaluate(expression, {"x": [1.0, 2.0, 3.0, 4.0]}, limits=Limits(max_graph_elements=7))
    assert status_of(err.value) == 413 and err.value.code == "too_large"


# --------------------------------------------------------------------------------------
# GLASSLLM_MAX_CHECK_ELEMENTS (413), GLASSLLM_MAX_CONCURRENCY, MAX_QUEUE, RETRY_AFTER_SECONDS (503)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", [1, 3])
def test_check_of_exactly_max_check_elements_runs_and_one_more_is_413(limit):
    def body(n: int) -> dict:
        return {"expression": "x * x", "variables": {"x": [1.5] * n}, "check": True}

    with client_with(max_check_elements=limit) as c:
        at = post(c, "/api/v1/eval", body(limit))
        over = post(c, "/api/v1/eval", body(limit + 1))
    assert at.status_code == 200, at.text[:300]
    assert at.json()["check"]["x"]["passed"] is True
    err = refused(over, 413, "too_large", "check", f"the limit is {limit}")
    assert str(limit + 1) in err["message"]


def test_max_check_elements_zero_refuses_every_check():
    with client_with(max_check_elements=0) as c:
        r = post(c, "/api/v1/eval", {"expression": "x", "variables": {"x": [1.0]},
                                     "check": True})
        plain = post(c, "/api/v1/eval", {"expression": "x", "variables": {"x": [1.0]}})
    assert r.status_code == 413 and r.json()["error"]["input"] == "check"
    assert plain.status_code == 200


@pytest.mark.parametrize("capacity", [1, 2])
def test_max_concurrency_slots_are_all_usable_and_the_next_request_is_503(capacity):
    """The slots queue; with GLASSLLM_MAX_QUEUE=0 nothing may wait, so the
    request after the last slot is refused at once (503 queue_full + Retry-After). Slots
    are held by tasks on the app's loop, released by events the test sets."""
    app = create_app(Settings(max_concurrency=capacity, max_queue=0, retry_after_seconds=7))
    adm = app.state.admission
    with TestClient(app) as c:
        release = c.portal.call(_new_event)
        held = [c.portal.start_task_soon(_hold, adm, release) for _ in range(capacity - 1)]
        c.portal.call(_until, lambda: adm.running == capacity - 1)
        at = post(c, "/api/v1/ops/neg", {"inputs": {"a": [1.0]}})     # takes the last slot
        held.append(c.portal.start_task_soon(_hold, adm, release))       # now every slot
        c.portal.call(_until, lambda: adm.running == capacity)
        over = post(c, "/api/v1/ops/neg", {"inputs": {"a": [1.0]}})
        over_eval = post(c, "/api/v1/eval", {"expression": "x", "variables": {"x": [1.0]}})
        c.portal.call(release.set)
        for task in held:
            task.result()
        after = post(c, "/api/v1/ops/neg", {"inputs": {"a": [1.0]}})
    assert at.status_code == 200 and after.status_code == 200
    for r in (over, over_eval):
        assert r.status_code == 503 and r.headers["Retry-After"] == "7"
        err = r.json()["error"]
        assert err["code"] == "queue_full" and "GLASSLLM_MAX_QUEUE" in err["message"]


async def _new_event():
    import asyncio
    return asyncio.Event()


async def _hold(adm, release) -> None:
    async with adm.slot(cost=1, client="holder"):
        await release.wait()


async def _until(condition) -> None:
    import asyncio
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")
