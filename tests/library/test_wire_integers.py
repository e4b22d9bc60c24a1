"""The wire format's integers (SPEC H3, H4): every integer input is an int64, and one outside
[-2**63, 2**63 - 1] is a 422 naming the input — never wrapped through uint64 (2**64 - 1 would
become the valid id -1), never a 400 naming a value the user did not send, never a 500."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox import wire
from glassllm.sandbox.expr import ExprError, evaluate
from glassllm.sandbox.wire import WireError, coerce, decode_index
from glassllm_service.app import create_app
from glassllm_service.http_errors import status_of
from glassllm_service.settings import Settings

TOO_BIG = [2**63, 2**64 - 1, -(2**63) - 1, 10**400]
W = [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def post(client, path: str, raw: str):
    """Raw JSON text: Python's json module would write 10**400 fine, orjson parses it."""
    return client.post(path, content=raw, headers={"Content-Type": "application/json"})


# --------------------------------------------------------------------------------------
# glassllm.sandbox.wire, every integer kind
# --------------------------------------------------------------------------------------

def every_int_kind(n: int) -> list[tuple[str, object]]:
    """(kind, JSON value) pairs that each carry the integer n somewhere an int is read."""
    return [("int_array", n), ("int_array", [n]), ("int_array", [[0], [n]]),
            ("int_array", [-1, n]), ("int", n), ("axis", n), ("axis", [0, n]), ("axes", [n]),
            ("shape", n), ("shape", [2, n]), ("index", n), ("index", [0, n]),
            ("index", {"start": n}), ("index", {"stop": n}), ("index", {"step": n}),
            ("index", {"array": n}), ("index", [{"array": [[0], [n]]}])]


@pytest.mark.parametrize("n", TOO_BIG, ids=["2**63", "2**64-1", "-2**63-1", "10**400"])
def test_every_int_kind_refuses_integers_outside_int64(n):
    """H3/H4: each integer slot of each kind, filled with n, is refused by name."""
    for kind, value in every_int_kind(n):
        with pytest.raises(WireError) as err:
            coerce(kind, "x", value, maybe_bools=False)
        assert err.value.input == "x", (kind, value)
        assert "outside int64" in err.value.rule, (kind, err.value.rule)
        assert len(err.value.rule) < 120, "a 400-digit integer is described, not echoed"


def test_int64_extremes_still_pass_exactly():
    lo, hi = -(2**63), 2**63 - 1
    ids = coerce("int_array", "ids", [hi, lo, 0], maybe_bools=False)
    assert ids.dtype == np.int64 and ids.tolist() == [hi, lo, 0]
    assert coerce("int_array", "ids", hi).tolist() == hi
    assert coerce("int", "repeats", hi) == hi
    assert decode_index("index", [{"start": lo, "stop": hi}, lo]) == (slice(lo, hi), lo)


@pytest.mark.parametrize("value", [10**400, [1.0, 10**400], [[-(10**400)], [0.0]]])
def test_float_kinds_refuse_integers_beyond_float64(value):
    """A Python int too large for float64 (from a notebook, or a JSON reader that keeps it)."""
    with pytest.raises(WireError) as err:
        coerce("tensor", "a", value)
    assert err.value.input == "a" and "too large for float64" in err.value.rule
    assert "401 digits" in err.value.rule


def test_float_kinds_take_big_but_finite_integers_as_float64():
    a = coerce("tensor", "a", [2**64, -(2**63)], maybe_bools=False)
    assert a.tolist() == [1.8446744073709552e19, -9.223372036854775808e18]


# --------------------------------------------------------------------------------------
# the service and the evaluator
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("ids", ["[18446744073709551615]", "[9223372036854775808]",
                                 "18446744073709551615", "[[0], [9223372036854775808]]"])
def test_embedding_ids_outside_int64_are_422_naming_ids(client, ids):
    """Was: [2**64-1] → 200 with row -1; [2**63] → 400 naming -2**63; a scalar → 500."""
    r = post(client, "/api/v1/ops/embedding", f'{{"inputs": {{"weight": {W}, "ids": {ids}}}}}')
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["input"] == "ids" and "outside int64" in err["message"]
    assert "-9223372036854775808" not in err["message"]
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("weight", ["[1.0, 2.0, 3.0]", "[[[1.0], [2.0]]]", "5.0"])
def test_an_embedding_weight_that_is_not_2d_is_400_naming_weight(client, weight):
    """L3.1: weight (V, d). Was: a 1-D weight answered 200 with single numbers."""
    r = post(client, "/api/v1/ops/embedding", f'{{"inputs": {{"weight": {weight}, "ids": [0]}}}}')
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["input"] == "weight" and "weight must have shape (V, d)" in err["message"]


def test_integers_json_reads_as_floats_are_still_refused_as_ids(client):
    """orjson reads integers beyond [-2**63, 2**64) as float64: still integers, outside int64
    (QA pass 3, defect 4: they were told "must hold integers; got 1.8446744073709552e+19")."""
    for ids, shown in (("[-9223372036854775809]", "-9.223372036854776e+18"),
                       ("[18446744073709551616]", "1.8446744073709552e+19")):
        r = post(client, "/api/v1/ops/embedding", f'{{"inputs": {{"weight": {W}, "ids": {ids}}}}}')
        assert r.status_code == 422 and r.json()["error"]["input"] == "ids"
        assert r.json()["error"]["message"] == (f"input 'ids': the integer {shown} is outside"
                                                " int64 (-2**63 to 2**63 - 1)")


BIG = "18446744073709551616"                    # 2**64: orjson gives 1.8446744073709552e+19
HUGE = "1" + "0" * 30                           # an integer literal orjson gives as 1e+30


@pytest.mark.parametrize("big,shown", [(BIG, "1.8446744073709552e+19"), (HUGE, "1e+30")])
@pytest.mark.parametrize("op,inputs,name", [
    ("embedding", f'{{"weight": {W}, "ids": [0, BIG]}}', "ids"),
    ("cross_entropy", '{"logits": [[0.0, 0.0]], "targets": [BIG]}', "targets"),
    ("tsum", '{"a": [1.0], "axis": BIG}', "axis"),
    ("tsum", '{"a": [1.0], "axis": [0, BIG]}', "axis"),
    ("reshape", '{"a": [1.0], "shape": [BIG]}', "shape"),
    ("reshape", '{"a": [1.0], "shape": BIG}', "shape"),
    ("repeat_kv", '{"x": [[[[1.0]]]], "repeats": BIG}', "repeats"),
    ("getitem", '{"a": [1.0], "index": BIG}', "index"),
    ("getitem", '{"a": [1.0], "index": {"stop": BIG}}', "index"),
    ("attention", '{"x": [[[1.0, 0.0]]], "wq": [[1.0, 0.0], [0.0, 1.0]], "wk": [[1.0, 0.0],'
                  ' [0.0, 1.0]], "wv": [[1.0, 0.0], [0.0, 1.0]], "wo": [[1.0, 0.0], [0.0,'
                  ' 1.0]], "n_heads": BIG, "n_kv_heads": 1, "cos": [[1.0]], "sin": [[0.0]]}',
     "n_heads"),
])
def test_integers_past_uint64_are_outside_int64_for_every_int_input(client, op, inputs, name,
                                                                    big, shown):
    """H3/H4 (QA pass 3, defect 4): the same words as for 2**63 .. 2**64 - 1, naming the input."""
    r = post(client, f"/api/v1/ops/{op}", f'{{"inputs": {inputs.replace("BIG", big)}}}')
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["input"] == name
    assert err["message"] == f"input '{name}': the integer {shown} is outside int64 (-2**63 to" \
                             " 2**63 - 1)"


def test_integral_floats_inside_int64_are_still_not_integers():
    with pytest.raises(WireError, match=r"must be an integer; got 3.0"):
        coerce("int", "repeats", 3.0)
    with pytest.raises(WireError, match=r"must hold integers \(indices\); got 1.5"):
        coerce("int_array", "ids", [0, 1.5])
    with pytest.raises(WireError, match="must be an integer; got inf"):
        coerce("int", "repeats", float("inf"))


def test_cross_entropy_targets_outside_int64_are_422(client):
    r = post(client, "/api/v1/ops/cross_entropy",
             '{"inputs": {"logits": [[0.0, 0.0]], "targets": [18446744073709551615]}}')
    assert r.status_code == 422 and r.json()["error"]["input"] == "targets"


@pytest.mark.parametrize("op,inputs,name", [
    ("getitem", '{"a": [1.0], "index": {"array": 18446744073709551615}}', "index"),
    ("getitem", '{"a": [1.0], "index": {"start": 9223372036854775808}}', "index"),
    ("tsum", '{"a": [1.0], "axis": 9223372036854775808}', "axis"),
    ("reshape", '{"a": [1.0], "shape": [9223372036854775808]}', "shape"),
    ("repeat_kv", '{"x": [[[[1.0]]]], "repeats": 9223372036854775808}', "repeats"),
])
def test_other_int_inputs_outside_int64_are_422(client, op, inputs, name):
    r = post(client, f"/api/v1/ops/{op}", f'{{"inputs": {inputs}}}')
    assert r.status_code == 422, r.text
    assert r.json()["error"]["input"] == name


def test_integer_literal_beyond_float64_in_json_is_422(client):
    r = post(client, "/api/v1/ops/exp", '{"inputs": {"a": [1' + "0" * 400 + "]}}")
    assert r.status_code == 422 and r.json()["error"]["input"] == "request body"


def test_eval_variables_outside_int64_are_422(client):
    body = ('{"expression": "embedding(w, ids)", "variables": {"w": [[1.0]],'
            ' "ids": 18446744073709551615}}')
    r = post(client, "/api/v1/eval", body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["input"] == "variables.ids"


@pytest.mark.parametrize("expression", ["x[18446744073709551616]", "x[9223372036854775808:]",
                                        "x[::9223372036854775808]",
                                        "x.sum(axis=18446744073709551615)",
                                        "x.reshape(9223372036854775808)",
                                        "x[[0, 9223372036854775808]]"])
def test_eval_integer_literals_outside_int64_are_422(expression):
    with pytest.raises(ExprError) as err:
        evaluate(expression, {"x": [1.0]})
    assert status_of(err.value) == 422 and "outside int64" in err.value.message


def test_eval_python_variables_beyond_float64_are_422():
    with pytest.raises(ExprError) as err:
        evaluate("x + 1", {"x": [10**400]})
    assert status_of(err.value) == 422 and err.value.input == "variables.x"


# --------------------------------------------------------------------------------------
# encode_base64 (the client's binary arrays): uint64 past int64 is refused, never wrapped
# --------------------------------------------------------------------------------------

def test_encode_base64_refuses_uint64_above_int64_max_instead_of_wrapping():
    """H3: every integer on the wire is an int64. A uint64 of 2**64 - 1 cast unchecked becomes
    -1 (the last row of an embedding); encode_base64 says the rule instead, at any size."""
    ids = np.r_[np.zeros(63, np.uint64), np.uint64(2**64 - 1)]
    with pytest.raises(ValueError, match=r"above 2\*\*63-1 do not fit int64") as e:
        wire.encode_base64(ids)
    assert "18446744073709551615" in str(e.value)
    with pytest.raises(ValueError, match="do not fit int64"):
        wire.encode_base64(np.array([2**63], dtype=np.uint64))


def test_encode_base64_keeps_unsigned_values_that_fit_int64():
    """H3: the largest uint64 that fits (2**63 - 1) and every uint32 travel as exact int64."""
    for arr in (np.array([0, 2**63 - 1], dtype=np.uint64),
                np.array([0, 2**32 - 1], dtype=np.uint32), np.zeros((0, 3), np.uint64)):
        enc = wire.encode_base64(arr)
        assert enc["dtype"] == "int64" and enc["shape"] == list(arr.shape)
        back = coerce("int_array", "ids", enc)
        assert back.dtype == np.int64 and back.tolist() == arr.astype(object).tolist()


@pytest.mark.parametrize("mask, shown", [
    (["yes", "no"], "got the string 'yes'"), ([True, "no"], "got the string 'no'"),
    ([[1, 0], [2, 0]], "got 2"), ([0.5, 1], "got 0.5"), ([True, None], "got null"),
])
def test_a_mask_names_its_first_element_that_is_not_a_boolean(mask, shown):
    """Was: "got elements of type str96" (NumPy's dtype name of the whole list)."""
    from glassllm.errors import WireError
    from glassllm.sandbox.wire import coerce
    with pytest.raises(WireError, match="must hold booleans") as info:
        coerce("bool_mask", "mask", mask)
    assert info.value.input == "mask" and str(info.value).endswith(shown)


@pytest.mark.parametrize("op, body, blamed", [
    ("embedding", '{"inputs": {"weight": [[1.0, 2.0], [3.0, 4.0]], "ids": [5]}}', "ids"),
    ("cross_entropy", '{"inputs": {"logits": [[1.0, 2.0]], "targets": [3]}}', "targets"),
    ("getitem", '{"inputs": {"a": [1.0, 2.0], "index": [5]}}', "index"),
])
def test_an_index_out_of_bounds_blames_the_index_input(client, op, body, blamed):
    """QA: was "input": "weight, ids"; docs/http.md blames an out-of-range id or target
    on that argument, as the expression evaluator's position does."""
    r = post(client, f"/api/v1/ops/{op}", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "numpy_error" and err["input"] == blamed
    assert "IndexError: index" in err["message"] and "out of bounds" in err["message"]
