"""Tests written for mutants that `make mutation` found alive (issue 17): each pins a
behaviour no other fast test observed. Public API only (Tensor, ops, the HTTP routes,
Settings, the codec's encoder)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm import Tensor
from glassllm.autograd import mean
from glassllm.layers import GlassConfig, GlassLM
from glassllm_service.app import create_app
from glassllm_service.codec import dumps, encode_value
from glassllm_service.settings import GiB, Settings, SettingsError


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def test_mean_over_one_axis_without_keepdims_spreads_the_gradient_along_that_axis():
    a = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    out = mean(a, axis=1)                                    # (2,)
    out.backward(np.array([3.0, 6.0]))
    np.testing.assert_array_equal(a.grad, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])


def test_repr_summarises_past_64_elements_only():
    assert "..." not in repr(Tensor(np.zeros(64)))
    assert "..." in repr(Tensor(np.zeros(65)))


def test_asarray_with_a_dtype_converts():
    arr = np.asarray(Tensor([1.5, -2.5]), dtype=np.int64)
    assert arr.dtype == np.int64 and arr.tolist() == [1, -2]


def test_reshape_takes_one_integer():
    assert Tensor(np.arange(6.0).reshape(2, 3)).reshape(6).shape == (6,)
    assert Tensor(np.arange(6.0)).reshape((3, 2)).shape == (3, 2)


@pytest.mark.parametrize("length,ellipsis", [(20, False), (21, True)])
def test_a_long_string_is_cut_at_20_characters_in_messages(client, length, ellipsis):
    r = client.post("/api/v1/ops/neg", json={"inputs": {"a": "x" * length}})
    message = r.json()["error"]["message"]
    assert r.status_code == 422 and ("x" * 20) in message and ("x" * 21) not in message
    assert ("…" in message) is ellipsis


def test_no_content_type_is_415_naming_the_header(client):
    r = client.post("/api/v1/ops/neg", content=b'{"inputs": {"a": 1.0}}')
    assert r.status_code == 415
    err = r.json()["error"]
    assert err["code"] == "unsupported_media_type" and err["input"] == "Content-Type"
    assert err["message"] == "Content-Type must be application/json; got 'none'"
    r = client.post("/api/v1/ops/neg", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.json()["error"]["message"] == "Content-Type must be application/json; got 'text/plain'"


def test_an_empty_and_an_invalid_body_are_422_naming_the_body(client):
    for path, send in (("/api/v1/ops/neg", '{"inputs": {...}}'),
                       ("/api/v1/eval", '{"expression": ...}')):
        empty = client.post(path, content=b"  ", headers={"Content-Type": "application/json"})
        err = empty.json()["error"]
        assert empty.status_code == 422 and err["input"] == "request body"
        assert err["code"] == "invalid_request"
        assert err["message"] == f"the body is empty; send {send}"
        bad = client.post(path, content=b"{nope", headers={"Content-Type": "application/json"})
        err = bad.json()["error"]
        assert bad.status_code == 422 and err["code"] == "invalid_json"
        assert err["input"] == "request body" and "not valid JSON" in err["message"]


def test_encode_value_writes_float64_whatever_the_dtype():
    assert dumps(encode_value(np.array([1, 2]))) == b"[1.0,2.0]"
    assert dumps(encode_value(np.array([0.1], dtype=np.float32))) == b"[0.10000000149011612]"
    assert dumps(encode_value(np.array(3))) == b"3.0"


@pytest.mark.parametrize("field,top", [("max_body_bytes", GiB), ("max_array_elements", 10**9),
                                       ("max_result_elements", 10**10),
                                       ("max_matmul_madds", 10**15), ("max_concurrency", 1024),
                                       ("retry_after_seconds", 3600),
                                       ("max_expression_length", 1_000_000)])
def test_each_limit_accepts_its_top_value_and_refuses_one_more_by_name(field, top):
    assert getattr(Settings(**{field: top}), field) == top
    with pytest.raises(SettingsError) as err:
        Settings(**{field: top + 1})
    assert str(err.value) == (f"invalid settings: GLASSLLM_{field.upper()}={top + 1!r}:"
                              f" Input should be less than or equal to {top}")


def test_a_checkpoint_comes_back_with_its_config_and_weights(tmp_path):
    config = GlassConfig(vocab=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1,
                         ffn_hidden=16, max_seq_len=8, rope_theta=500.0, seed=3)
    model = GlassLM(config)
    model.save_checkpoint(tmp_path / "m.npz")
    back = GlassLM.from_checkpoint(tmp_path / "m.npz")
    assert back.config == config
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(back.forward(ids).data, model.forward(ids).data)


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5)),
                                             ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2))])
def test_batched_matmul_gradients_are_the_transposed_products_summed_over_broadcast(
        a_shape, b_shape):
    from glassllm.autograd import matmul
    rng = np.random.default_rng(0)
    a_np, b_np = rng.normal(size=a_shape), rng.normal(size=b_shape)
    a, b = Tensor(a_np, requires_grad=True), Tensor(b_np, requires_grad=True)
    out = matmul(a, b)
    g = rng.normal(size=out.shape)
    out.backward(g)
    ga = g @ np.swapaxes(b_np, -1, -2)
    gb = np.swapaxes(a_np, -1, -2) @ g
    while ga.ndim > a_np.ndim:
        ga = ga.sum(axis=0)
    while gb.ndim > b_np.ndim:
        gb = gb.sum(axis=0)
    ga = ga.sum(axis=tuple(i for i, n in enumerate(a_shape) if n == 1 and ga.shape[i] != 1),
                keepdims=True)
    gb = gb.sum(axis=tuple(i for i, n in enumerate(b_shape) if n == 1 and gb.shape[i] != 1),
                keepdims=True)
    np.testing.assert_allclose(a.grad, ga, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.grad, gb, rtol=1e-12, atol=1e-12)


def test_rope_refuses_a_differentiable_table_naming_the_op_and_the_table():
    from glassllm.autograd import rope
    x = Tensor(np.ones((1, 4)))
    with pytest.raises(TypeError, match=r"^rope: sin is a constant"):
        rope(x, np.ones((1, 2)), Tensor(np.zeros((1, 2)), requires_grad=True))
    with pytest.raises(TypeError, match=r"^rope: cos is a constant"):
        rope(x, Tensor(np.ones((1, 2)), requires_grad=True), np.zeros((1, 2)))


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


def test_every_bad_setting_is_listed_separated_by_semicolons():
    with pytest.raises(SettingsError) as err:
        Settings(max_body_bytes=0, max_json_depth=1)
    assert str(err.value) == (
        "invalid settings: GLASSLLM_MAX_BODY_BYTES=0: Input should be greater than or equal"
        " to 1; GLASSLLM_MAX_JSON_DEPTH=1: Input should be greater than or equal to 2")
