"""Every op's backward against central finite differences (glassllm.gradcheck).

Scalars (), size-1 axes, broadcasting both ways, keepdims, negative axes,
1-D and batched matmul, getitem with repeated advanced indices, where with a
broadcast condition — and a random (not all-ones) grad_output each time, so a
backward that ignores g or transposes it would fail.
"""

import numpy as np
import pytest

from glassllm import Tensor, gradcheck
from glassllm import autograd as ag

rng = np.random.default_rng(0)


def T(*shape, low=-2.0, high=2.0):
    return Tensor(rng.uniform(low, high, size=shape), requires_grad=True)


def pos(*shape):
    return T(*shape, low=0.5, high=2.0)


CASES = {
    # L1 arithmetic: broadcasting both ways, scalars, size-1 axes
    "add same": (ag.add, lambda: (T(3, 4), T(3, 4))),
    "add broadcast both ways": (ag.add, lambda: (T(3, 1), T(1, 4))),
    "add scalar ()": (ag.add, lambda: (T(), T(2, 3))),
    "add leading axes": (ag.add, lambda: (T(2, 3, 4), T(4))),
    "sub broadcast": (ag.sub, lambda: (T(4), T(3, 1))),
    "mul broadcast both ways": (ag.mul, lambda: (T(2, 1, 3), T(4, 1))),
    "mul scalar ()": (ag.mul, lambda: (T(), T())),
    "div broadcast": (ag.div, lambda: (T(3, 4), pos(1, 4))),
    "div by broadcast numerator": (ag.div, lambda: (T(1,), pos(2, 3))),
    "neg": (ag.neg, lambda: (T(2, 3),)),
    "pow int exponent": (lambda a: ag.pow(a, 3), lambda: (T(2, 3),)),
    "pow fractional exponent": (lambda a: ag.pow(a, 0.5), lambda: (pos(4),)),
    "pow negative exponent": (lambda a: ag.pow(a, -2.0), lambda: (pos(2, 2),)),
    "pow exponent -0.5": (lambda a: ag.pow(a, -0.5), lambda: (pos(3),)),
    "pow exponent -1": (lambda a: ag.pow(a, -1), lambda: (pos(3),)),
    "pow exponent 1.5": (lambda a: ag.pow(a, 1.5), lambda: (pos(3),)),
    "pow array exponent broadcasts a": (
        lambda a: ag.pow(a, np.array([[1.0, 2.0, 3.0]])),
        lambda: (pos(2, 1),),
    ),
    "exp": (ag.exp, lambda: (T(3, 2),)),
    "log": (ag.log, lambda: (pos(3, 2),)),
    "matmul 2d": (ag.matmul, lambda: (T(3, 4), T(4, 5))),
    "matmul (4,)@(4,5)": (ag.matmul, lambda: (T(4), T(4, 5))),
    "matmul (3,4)@(4,)": (ag.matmul, lambda: (T(3, 4), T(4))),
    "matmul (4,)@(4,)": (ag.matmul, lambda: (T(4), T(4))),
    "matmul batched (2,1,3,4)@(5,4,2)": (ag.matmul, lambda: (T(2, 1, 3, 4), T(5, 4, 2))),
    "matmul (4,)@(2,4,3)": (ag.matmul, lambda: (T(4), T(2, 4, 3))),
    "matmul batched @ matrix (2,3,4)@(4,5)": (ag.matmul, lambda: (T(2, 3, 4), T(4, 5))),
    "matmul matrix @ batched (3,4)@(2,2,4,5)": (ag.matmul, lambda: (T(3, 4), T(2, 2, 4, 5))),
    "matmul (2,3,4)@(4,)": (ag.matmul, lambda: (T(2, 3, 4), T(4))),
    # L2 reductions, shape, selection
    "tsum all": (ag.tsum, lambda: (T(2, 3),)),
    "tsum scalar ()": (ag.tsum, lambda: (T(),)),
    "tsum axis -1": (lambda a: ag.tsum(a, axis=-1), lambda: (T(2, 3, 4),)),
    "tsum axes (0,2) keepdims": (
        lambda a: ag.tsum(a, axis=(0, -1), keepdims=True),
        lambda: (T(2, 3, 4),),
    ),
    "tsum size-1 axis": (lambda a: ag.tsum(a, axis=1), lambda: (T(3, 1, 2),)),
    "mean all": (ag.mean, lambda: (T(2, 3),)),
    "mean axis -2 keepdims": (lambda a: ag.mean(a, axis=-2, keepdims=True), lambda: (T(2, 3, 4),)),
    "max all": (ag.max, lambda: (T(3, 4),)),
    "max axis 0": (lambda a: ag.max(a, axis=0), lambda: (T(3, 4),)),
    "max axis -1 keepdims": (lambda a: ag.max(a, axis=-1, keepdims=True), lambda: (T(2, 3, 4),)),
    "reshape": (lambda a: ag.reshape(a, (4, -1)), lambda: (T(2, 3, 2),)),
    "reshape to scalar": (lambda a: ag.reshape(a, ()), lambda: (T(1, 1),)),
    "transpose default": (ag.transpose, lambda: (T(2, 3, 4),)),
    "transpose perm with negatives": (lambda a: ag.transpose(a, (1, -1, 0)), lambda: (T(2, 3, 4),)),
    "getitem basic slices": (
        lambda a: ag.getitem(a, (slice(None), slice(1, None, 2))),
        lambda: (T(3, 5),),
    ),
    "getitem int + newaxis + ellipsis": (
        lambda a: ag.getitem(a, (1, None, Ellipsis)),
        lambda: (T(3, 4),),
    ),
    "getitem repeated advanced": (
        lambda a: ag.getitem(a, np.array([0, 2, 0, 0])),
        lambda: (T(3, 2),),
    ),
    "getitem 2-D int array of a 1-D tensor": (
        lambda a: ag.getitem(a, np.array([[3, 0], [3, -1]])),
        lambda: (T(4),),
    ),
    "getitem 2 advanced arrays, repeats": (
        lambda a: ag.getitem(a, (np.array([[0, 1], [0, 1]]), np.array([2, 2]))),
        lambda: (T(2, 3),),
    ),
    "getitem bool mask": (
        lambda a: ag.getitem(a, np.array([[True, False, True], [False, True, False]])),
        lambda: (T(2, 3),),
    ),
    "getitem negative index": (
        lambda a: ag.getitem(a, (-1, np.array([-1, -1]))),
        lambda: (T(2, 3),),
    ),
    "where broadcast condition": (
        lambda a, b: ag.where(np.array([True, False, True]), a, b),
        lambda: (T(2, 3), T(2, 1)),
    ),
    "where column condition": (
        lambda a, b: ag.where(np.array([[True], [False]]), a, b),
        lambda: (T(3), T(2, 3)),
    ),
    # L3
    "embedding repeated + negative ids": (
        lambda w: ag.embedding(w, np.array([[1, -1, 1], [0, 3, 3]])),
        lambda: (T(4, 3),),
    ),
    "masked_fill broadcast mask": (
        lambda a: ag.masked_fill(a, np.array([False, True, False]), 7.0),
        lambda: (T(2, 3),),
    ),
    "masked causal softmax": (
        lambda a: ag.softmax(ag.masked_fill(a, np.triu(np.ones((4, 4), bool), 1), -np.inf)),
        lambda: (T(2, 4, 4),),
    ),
    # L4
    "softmax last axis": (ag.softmax, lambda: (T(3, 5),)),
    "softmax axis 0": (lambda a: ag.softmax(a, axis=0), lambda: (T(3, 5),)),
    "log_softmax": (ag.log_softmax, lambda: (T(3, 5),)),
    "log_softmax axis -2": (lambda a: ag.log_softmax(a, axis=-2), lambda: (T(2, 3, 4),)),
    "sigmoid": (ag.sigmoid, lambda: (T(4, 3, low=-6, high=6),)),
    "silu": (ag.silu, lambda: (T(4, 3, low=-6, high=6),)),
    # relu away from its kink (finite differences straddling 0 see a slope of 1/2)
    "relu": (ag.relu, lambda: (Tensor(rng.choice([-1, 1], (4, 3)) * rng.uniform(0.1, 2, (4, 3)),
                                      requires_grad=True),)),
    "tanh": (ag.tanh, lambda: (T(4, 3, low=-4, high=4),)),
    "sqrt": (ag.sqrt, lambda: (pos(4, 3),)),
    "gelu": (ag.gelu, lambda: (T(4, 3, low=-6, high=6),)),
    "gelu_tanh": (ag.gelu_tanh, lambda: (T(4, 3, low=-6, high=6),)),
    "gelu approximate=tanh": (lambda a: ag.gelu(a, approximate="tanh"),
                              lambda: (T(4, 3, low=-6, high=6),)),
    # L5
    "cross_entropy": (lambda z: ag.cross_entropy(z, np.array([0, 3, 3, -1])), lambda: (T(4, 5),)),
    # L6
    "rope (B,H,n,dk)": (
        lambda x: ag.rope(x, *_angles(3, 4)),
        lambda: (T(2, 2, 3, 4),),
    ),
    "rope 2-D": (lambda x: ag.rope(x, *_angles(3, 6)), lambda: (T(3, 6),)),
    "repeat_kv": (lambda x: ag.repeat_kv(x, 3), lambda: (T(2, 2, 3, 4),)),
    "repeat_kv repeats 1": (lambda x: ag.repeat_kv(x, 1), lambda: (T(1, 2, 2, 2),)),
}


def _angles(n, dk):
    theta = np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, dk, 2) / dk)
    return np.cos(theta), np.sin(theta)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, make = CASES[name]
    inputs = make()
    out = fn(*inputs)
    grad_output = rng.normal(size=out.shape)
    result = gradcheck(fn, *inputs, grad_output=grad_output)
    worst = [(c.index, c.max_abs_err, c.max_rel_err) for c in result.inputs]
    assert result.passed, worst
    for check in result.inputs:
        assert check.analytic.shape == inputs[check.index].shape  # L0.5
        assert np.isfinite(check.analytic).all()


def test_every_autograd_op_has_a_gradcheck_case():
    covered = {name.split()[0] for name in CASES}
    # softmax_np and cross_entropy_grad return ndarrays (no backward, L0.2).
    assert set(ag.__all__) - {"softmax_np", "cross_entropy_grad"} <= covered


def test_gradcheck_catches_a_wrong_backward():
    def wrong_square(a):
        out = a.data**2
        return Tensor._make(out, (a,), "wrong", lambda g: (g * a.data,))  # missing factor 2

    result = gradcheck(wrong_square, T(3))
    assert not result.passed
    assert result.inputs[0].max_abs_err > 0.1


def test_gradcheck_leaves_callers_tensors_untouched_and_validates():
    x = T(2)
    before = x.data.copy()
    gradcheck(ag.exp, x)
    assert x.grad is None and np.array_equal(x.data, before)
    with pytest.raises(ValueError, match="no input requires grad"):
        gradcheck(ag.exp, Tensor([1.0]))
    with pytest.raises(ValueError, match="grad_output has shape"):
        gradcheck(ag.exp, x, grad_output=np.ones(3))


def test_gradcheck_reads_a_fortran_ordered_input_as_any_other():
    """gradcheck's numeric gradient of an input whose data is Fortran-ordered (a Tensor made
    from `arr.T`) is the real one, not zeros (its buffer was a copy the loop never saw)."""
    from glassllm.gradients.checks import gradcheck

    x = Tensor(np.arange(6.0).reshape(3, 2).T, requires_grad=True)  # (2, 3), F order
    assert x.data.flags.f_contiguous and not x.data.flags.c_contiguous
    report = gradcheck(lambda t: ag.mul(t, t), x)
    np.testing.assert_allclose(report.inputs[0].numeric, 2 * x.data, rtol=1e-6)
    assert report.passed
