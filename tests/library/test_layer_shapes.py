"""Layer shape contracts (SPEC L7, H4, H5; QA pass 3, defects 1 and 2).

The functional forms of `glassllm.layers` check every weight against the shapes their
docstrings state — norm gains (d,), linear weights (d_in, d_out), w1 / w3 (d, F), w2 (F, d),
wq (d, H·dk), wk / wv (d, Hkv·dk), wo (H·dk, d), cos / sin (n, dk/2) — and the head counts
(H divides d, Hkv divides H) before any product, with a `ShapeError` (a ValueError) that
names the input and both shapes. The registry's plans call the same checks, so the sandbox
answers a mismatch with a 400 naming that one input, before any work.
"""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm import Tensor, layers
from glassllm.layers import (
    attention,
    linear,
    rms_norm,
    rope_angles,
    swiglu,
    transformer_block,
)
from glassllm.sandbox import registry as R
from glassllm.shapes import ShapeError
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

I2 = np.eye(2)
X = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])                   # (B=1, n=3, d=2)
COS, SIN = [[1.0]] * 3, [[0.0]] * 3                                      # (n, dk/2) = (3, 1)


def block_inputs(**change) -> dict:
    """The QA pass's block: identity attention, F = 1000, H = Hkv = 1."""
    inputs = {"x": X, "attn_norm": np.ones(2), "wq": I2, "wk": I2, "wv": I2, "wo": I2,
              "ffn_norm": np.ones(2), "w1": np.ones((2, 1000)), "w2": np.ones((1000, 2)),
              "w3": np.ones((2, 1000)), "n_heads": 1, "n_kv_heads": 1, "cos": COS, "sin": SIN}
    return {**inputs, **change}


def call_block(inputs: dict):
    args = [Tensor(v) if isinstance(v, np.ndarray) else v for v in inputs.values()]
    return transformer_block(*args)


def refusal(fn, *args) -> ShapeError:
    with pytest.raises(ShapeError) as err:
        fn(*args)
    assert isinstance(err.value, ValueError)                             # L0.4: a ValueError
    return err.value


# --------------------------------------------------------------------------------------
# the library: each functional form checks its weights (L7)
# --------------------------------------------------------------------------------------

def test_block_refuses_a_norm_gain_numpy_would_broadcast(monkeypatch):
    """QA: ffn_norm (20000, 1, 1, 2) made a (20000, 1, 3, 2) output with a 60M hidden.
    Refused before work: the block's RMSNorm never runs for these."""
    real_rms_norm = layers.rms_norm

    def no_forward(*args, **kwargs):
        raise AssertionError("the block's forward ran for weights its rule refuses")

    monkeypatch.setattr(layers, "rms_norm", no_forward)
    err = refusal(call_block, block_inputs(ffn_norm=np.ones((20000, 1, 1, 2))))
    assert err.input == "ffn_norm"
    assert str(err) == ("ffn_norm must have shape (d,) = (2,) for x of shape (1, 3, 2);"
                        " got (20000, 1, 1, 2)")
    err = refusal(call_block, block_inputs(attn_norm=np.ones((200000, 1, 1, 2))))
    assert err.input == "attn_norm" and "got (200000, 1, 1, 2)" in str(err)
    monkeypatch.setattr(layers, "rms_norm", real_rms_norm)
    assert call_block(block_inputs()).shape == (1, 3, 2)                 # the contract holds


def test_rms_norm_and_linear_check_their_weight():
    x = Tensor(np.ones((2, 3)))
    err = refusal(rms_norm, x, Tensor(np.ones((2, 3))))
    assert err.input == "weight"
    assert str(err) == "weight must have shape (d,) = (3,) for x of shape (2, 3); got (2, 3)"
    assert refusal(rms_norm, Tensor(2.0), Tensor([1.0])).input == "x"    # 0-d: no last axis
    err = refusal(linear, x, Tensor(np.ones(3)))                         # 1-D: matmul drops it
    assert err.input == "weight" and str(err) == (
        "weight must be 2-D, shape (d_in, d_out) with d_in = 3 for x of shape (2, 3); got (3,)")
    err = refusal(linear, x, Tensor(np.ones((5, 3, 4))))                 # batched: broadcasts
    assert err.input == "weight" and "got (5, 3, 4)" in str(err)
    err = refusal(linear, x, Tensor(np.ones((2, 4))))
    assert str(err) == ("weight must have shape (d_in, d_out) = (3, 4) for x of shape (2, 3);"
                        " got (2, 4)")
    np.testing.assert_array_equal(linear(x, Tensor(np.ones((3, 4)))).data, np.full((2, 4), 3.0))


def test_swiglu_checks_w1_w2_w3():
    x = Tensor(np.ones((1, 2)))
    one = Tensor(np.ones((2, 4)))
    err = refusal(swiglu, x, one, Tensor(np.ones((4, 3))), one)
    assert err.input == "w2" and str(err) == (
        "w2 must have shape (F, d) = (4, 2) for x of shape (1, 2) and w1 of shape (2, 4);"
        " got (4, 3)")
    assert refusal(swiglu, x, one, Tensor(np.ones((4, 2))), Tensor(np.ones((2, 5)))).input == "w3"
    assert refusal(swiglu, x, Tensor(np.ones((3, 4))), Tensor(np.ones((4, 2))), one).input == "w1"


@pytest.mark.parametrize("name,shape", [("wq", (2, 4)), ("wk", (2, 1)), ("wv", (3, 2)),
                                        ("wo", (1, 2, 2))])
def test_attention_checks_each_projection(name, shape):
    w = {"wq": I2, "wk": I2, "wv": I2, "wo": I2, name: np.ones(shape)}
    err = refusal(attention, Tensor(X), *(Tensor(w[k]) for k in ("wq", "wk", "wv", "wo")),
                  1, 1, COS, SIN)
    assert err.input == name and str(err).startswith(f"{name} must have shape (")
    assert f"got {shape}" in str(err) and "for x of shape (1, 3, 2), H=1, Hkv=1" in str(err)


@pytest.mark.parametrize("n_heads", [3, 4])
def test_head_divisibility_is_checked_before_any_matmul(n_heads, monkeypatch):
    """QA: d=2 with H=3 or 4 told of a matmul "core dimension" instead of the heads."""
    import glassllm.layers as layers

    def no_matmul(*args):
        raise AssertionError("a matmul ran before the head counts were checked")

    monkeypatch.setattr(layers, "matmul", no_matmul)
    w = [Tensor(I2)] * 4
    err = refusal(attention, Tensor(X), *w, n_heads, 1, COS, SIN)
    assert err.input == "n_heads" and str(err) == f"d_model 2 is not divisible by n_heads {n_heads}"
    err = refusal(attention, Tensor(np.ones((1, 3, 4))), *[Tensor(np.eye(4))] * 4, 2, 3,
                  *rope_angles(3, 2))
    assert err.input == "n_kv_heads" and str(err) == "n_heads 2 is not divisible by n_kv_heads 3"
    err = refusal(call_block, block_inputs(n_heads=n_heads))
    assert err.input == "n_heads" and str(err) == f"d_model 2 is not divisible by n_heads {n_heads}"


# --------------------------------------------------------------------------------------
# the registry plans the same checks; the service answers 400 naming the input (H4, H5)
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings(max_body_bytes=32 * 1024 * 1024))) as c:
        yield c


def post(client, path: str, body: dict):
    return client.post(path, content=orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY),
                       headers={"Content-Type": "application/json"})


def test_plan_refuses_what_the_library_refuses():
    op = R.OPS["transformer_block"]
    with pytest.raises(ShapeError, match=r"ffn_norm must have shape \(d,\) = \(2,\)"):
        op.plan({**block_inputs(ffn_norm=R.probe((20000, 1, 1, 2))), "eps": 1e-6})
    with pytest.raises(ShapeError, match="d_model 2 is not divisible by n_heads 4"):
        R.OPS["attention"].plan({"x": X, "wq": I2, "wk": I2, "wv": I2, "wo": I2,
                                    "n_heads": 4, "n_kv_heads": 1, "cos": COS, "sin": SIN})
    with pytest.raises(ShapeError, match=r"weight must have shape \(d,\)"):
        R.OPS["rms_norm"].plan({"x": R.probe((1, 3, 2)), "weight": R.probe((3, 2)),
                                   "eps": 1e-6})


@pytest.mark.parametrize("name,shape", [("ffn_norm", (20000, 1, 1, 2)),
                                        ("attn_norm", (200000, 1, 1, 2))])
def test_block_with_a_broadcasting_gain_is_400_before_work(client, name, shape, monkeypatch):
    """QA: 200 after 9.8 s with a (20000, 1, 3, 2) output; 400 "too many values to unpack".

    "Before work" is shown by structure, not by a clock: the layer's forward (its RMSNorm)
    must never run for a refused request."""
    def no_forward(*args, **kwargs):
        raise AssertionError("the block's forward ran for a request its plan refuses")

    monkeypatch.setattr(layers, "rms_norm", no_forward)
    r = post(client, "/api/v1/ops/transformer_block",
             {"inputs": block_inputs(**{name: np.ones(shape)})})
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert err["input"] == name and err["code"] == "shape_error"
    assert err["message"] == (f"transformer_block: {name} must have shape (d,) = (2,) for x of"
                              f" shape (1, 3, 2); got {shape}")
    variables = {k: v for k, v in block_inputs(**{name: np.ones(shape)}).items()
                 if k not in ("n_heads", "n_kv_heads")}
    expression = ("transformer_block(x, attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3, 1, 1,"
                  " cos, sin)")
    r = post(client, "/api/v1/eval", {"expression": expression, "variables": variables})
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert err["input"] == f"variables.{name}" and err["position"] == expression.index(name)
    assert f"{name} must have shape (d,) = (2,)" in err["message"]


@pytest.mark.parametrize("op", ["attention", "transformer_block"])
@pytest.mark.parametrize("n_heads", [3, 4])
def test_heads_not_dividing_d_is_400_naming_n_heads(client, op, n_heads):
    inputs = block_inputs(n_heads=n_heads)
    if op == "attention":
        inputs = {k: inputs[k] for k in ("x", "wq", "wk", "wv", "wo", "n_heads", "n_kv_heads",
                                         "cos", "sin")}
    r = post(client, f"/api/v1/ops/{op}", {"inputs": inputs})
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert err["input"] == "n_heads"                           # the page marks n_heads only
    assert err["message"] == f"{op}: d_model 2 is not divisible by n_heads {n_heads}"
    r = post(client, "/api/v1/eval", {"expression": f"attention(x, w, w, w, w, {n_heads}, 1,"
                                                    " cos, sin)",
                                      "variables": {"x": X, "w": I2, "cos": COS, "sin": SIN}})
    err = r.json()["error"]
    assert r.status_code == 400 and "d_model 2 is not divisible by n_heads" in err["message"]
    assert err["position"] == len("attention(x, w, w, w, w, ")  # the caret under the count


def test_layer_shape_errors_name_the_weight():
    from glassllm.layers import swiglu_shape, transformer_block_shape
    from glassllm.shapes import ShapeError
    with pytest.raises(ShapeError) as err:
        swiglu_shape((2, 4), (4, 6), (6, 4), (4, 5))
    assert err.value.input == "w3"
    with pytest.raises(ShapeError) as err:
        transformer_block_shape((1, 2, 4), (3,), (4, 4), (4, 4), (4, 4), (4, 4), (4,),
                                (4, 6), (6, 4), (4, 6), 2, 2, (2, 1), (2, 1))
    assert err.value.input == "attn_norm"


@pytest.mark.parametrize("eps", [-1e-6, float("nan"), float("inf"), True, "1e-6"])
@pytest.mark.parametrize("fused", [False, True])
def test_rms_norm_refuses_an_eps_that_is_not_a_finite_number_from_0(eps, fused):
    # a negative eps takes the root of a negative mean square: NaN, silently
    x, w = Tensor([[0.001, 0.001]]), Tensor([1.0, 2.0])
    with pytest.raises((ValueError, TypeError), match=r"^eps must be a (finite|real) number"):
        rms_norm(x, w, eps=eps, fused=fused)
    np.testing.assert_allclose(rms_norm(Tensor([[3.0, 4.0]]), w, eps=0.0, fused=fused).data,
                               [[0.848528137423857, 2.262741699796952]], rtol=1e-15)


def test_the_op_route_blames_the_one_input_a_library_rule_names(client):
    r = client.post("/api/v1/ops/rms_norm", json={"inputs": {
        "x": [[3.0, 4.0]], "weight": [1.0, 2.0], "eps": -1.0}})
    assert r.status_code == 400
    assert r.json()["error"]["input"] == "eps"
    assert "eps must be a finite number >= 0.0, got -1.0" in r.json()["error"]["message"]
