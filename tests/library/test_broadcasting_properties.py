"""Property-based tests (hypothesis): shapes and broadcasting for every binary op (L0.4, L0.5)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from glassllm import Tensor, gradcheck
from glassllm import autograd as ag

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False)
BINARY = [ag.add, ag.sub, ag.mul]


@settings(max_examples=60, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3),
    op=st.sampled_from(BINARY),
    data=st.data(),
)
def test_binary_ops_broadcast_like_numpy_and_grads_keep_input_shapes(shapes, op, data):
    (sa, sb), result_shape = shapes.input_shapes, shapes.result_shape
    a = Tensor(data.draw(hnp.arrays(np.float64, sa, elements=finite)), requires_grad=True)
    b = Tensor(data.draw(hnp.arrays(np.float64, sb, elements=finite)), requires_grad=True)
    out = op(a, b)
    assert out.shape == result_shape
    g = data.draw(hnp.arrays(np.float64, result_shape, elements=finite))
    out.backward(g)
    assert a.grad.shape == sa and b.grad.shape == sb  # L0.5
    # every output element depends on exactly one element of each input, so the
    # gradients summed over an input equal the incoming gradient summed over the output
    bb = np.broadcast_to(b.data, result_shape)
    ab = np.broadcast_to(a.data, result_shape)
    expected_a = {ag.add: g.sum(), ag.sub: g.sum(), ag.mul: (g * bb).sum()}[op]
    expected_b = {ag.add: g.sum(), ag.sub: -g.sum(), ag.mul: (g * ab).sum()}[op]
    np.testing.assert_allclose(a.grad.sum(), expected_a, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(b.grad.sum(), expected_b, rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    op=st.sampled_from([ag.add, ag.sub, ag.mul, ag.div]),
    data=st.data(),
)
def test_binary_ops_pass_gradcheck_for_any_broadcast(shapes, op, data):
    sa, sb = shapes.input_shapes
    a = Tensor(data.draw(hnp.arrays(np.float64, sa, elements=finite)), requires_grad=True)
    away_from_zero = st.floats(0.5, 3) | st.floats(-3, -0.5)
    b = Tensor(data.draw(hnp.arrays(np.float64, sb, elements=away_from_zero)), requires_grad=True)
    g = data.draw(hnp.arrays(np.float64, shapes.result_shape, elements=finite))
    assert gradcheck(op, a, b, grad_output=g).passed


@settings(max_examples=40, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4),
    keepdims=st.booleans(),
    reducer=st.sampled_from([ag.tsum, ag.mean, ag.max]),
    data=st.data(),
)
def test_reductions_over_any_axes_match_numpy_and_gradcheck(shape, keepdims, reducer, data):
    ndim = len(shape)
    axes = data.draw(
        st.none()
        | st.integers(-ndim, ndim - 1)
        | st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)
    )
    # distinct values, so max has no ties and finite differences stay on one branch
    values = np.random.default_rng(len(shape)).permutation(int(np.prod(shape))).reshape(shape)
    x = Tensor(values * 0.1, requires_grad=True)
    out = reducer(x, axis=axes, keepdims=keepdims)
    expected = {ag.tsum: np.sum, ag.mean: np.mean, ag.max: np.max}[reducer](
        x.data, axis=axes, keepdims=keepdims
    )
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)
    assert gradcheck(lambda t: reducer(t, axis=axes, keepdims=keepdims), x, eps=1e-4).passed


@settings(max_examples=30, deadline=None)
@given(
    batch=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3),
    n=st.integers(1, 3), k=st.integers(1, 3), m=st.integers(1, 3),
    vec_a=st.booleans(), vec_b=st.booleans(),
)
def test_matmul_any_batch_broadcast_and_1d_operands(batch, n, k, m, vec_a, vec_b):
    rng = np.random.default_rng(n * 100 + k * 10 + m)
    sa = (k,) if vec_a else batch.input_shapes[0] + (n, k)
    sb = (k,) if vec_b else batch.input_shapes[1] + (k, m)
    a = Tensor(rng.normal(size=sa), requires_grad=True)
    b = Tensor(rng.normal(size=sb), requires_grad=True)
    out = ag.matmul(a, b)
    assert out.shape == np.matmul(a.data, b.data).shape
    g = rng.normal(size=out.shape)
    assert gradcheck(ag.matmul, a, b, grad_output=g).passed
