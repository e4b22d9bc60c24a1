"""The checks that do not hinge on eps (glassllm.gradients.checks): the Taylor remainder's
order on every op of the registry (smooth: >= 1.8; linear: round-off; at a kink: <= 1.2),
on a deliberately wrong rule of five ops (<= 1.2), the adjoint (dot-product) test, the
eps sweep's curve, and the float32 emulation, which tells a wrong rule from rounding where
plain finite differences at float32 cannot."""

from __future__ import annotations

import numpy as np
import pytest

from glassllm import Tensor, layers
from glassllm import autograd as ag
from glassllm.gradients import adjoint_test, eps_sweep, gradcheck, taylor_test
from glassllm.sandbox.registry import OPS

rng = np.random.default_rng(7)


def T(*shape, low=-2.0, high=2.0):
    return Tensor(rng.uniform(low, high, size=shape), requires_grad=True)


def away(*shape):
    """Values at least 0.5 from 0: no kink of relu within the test's largest step."""
    return Tensor(rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape),
                  requires_grad=True)


def pos(*shape):
    return T(*shape, low=0.5, high=2.0)


def angles(n, dk):
    return layers.rope_angles(n, dk)


def attention_inputs(d=8, h=4, hkv=2, n=3):
    dk = d // h
    return (T(2, n, d), T(d, d), T(d, hkv * dk), T(d, hkv * dk), T(d, d), h, hkv, *angles(n, dk))


def block_inputs(d=8, h=4, hkv=2, n=3, f=12):
    dk = d // h
    return (T(1, n, d), pos(d), T(d, d), T(d, hkv * dk), T(d, hkv * dk), T(d, d), pos(d),
            T(d, f), T(f, d), T(d, f), h, hkv, *angles(n, dk))


# every registry op with a gradient: (fn, inputs, what its remainder does)
SMOOTH, LINEAR = "smooth", "linear"
OP_CASES = {
    "add": (ag.add, lambda: (T(3, 1), T(1, 4)), LINEAR),
    "sub": (ag.sub, lambda: (T(4), T(3, 1)), LINEAR),
    "mul": (ag.mul, lambda: (T(2, 3), T(3)), SMOOTH),             # bilinear: order 2
    "div": (ag.div, lambda: (T(3, 4), pos(1, 4)), SMOOTH),
    "neg": (ag.neg, lambda: (T(2, 3),), LINEAR),
    "exp": (ag.exp, lambda: (T(3, 2),), SMOOTH),
    "log": (ag.log, lambda: (pos(3, 2),), SMOOTH),
    "sqrt": (ag.sqrt, lambda: (pos(4, 3),), SMOOTH),
    "pow": (lambda a: ag.pow(a, 3), lambda: (T(2, 3),), SMOOTH),
    "rpow": (lambda e: ag._rpow(2.0, e), lambda: (T(4),), SMOOTH),
    "matmul": (ag.matmul, lambda: (T(3, 4), T(4, 2)), SMOOTH),
    "tsum": (lambda a: ag.tsum(a, axis=-1), lambda: (T(2, 3, 4),), LINEAR),
    "mean": (lambda a: ag.mean(a, axis=0, keepdims=True), lambda: (T(3, 4),), LINEAR),
    "max": (lambda a: ag.max(a, axis=-1), lambda: (T(3, 5),), LINEAR),   # no ties: locally linear
    "reshape": (lambda a: ag.reshape(a, (4, -1)), lambda: (T(2, 3, 2),), LINEAR),
    "transpose": (lambda a: ag.transpose(a, (1, 0, 2)), lambda: (T(2, 3, 4),), LINEAR),
    "getitem": (lambda a: ag.getitem(a, np.array([0, 2, 0])), lambda: (T(3, 2),), LINEAR),
    "where": (lambda a, b: ag.where(np.array([True, False, True]), a, b),
              lambda: (T(2, 3), T(2, 1)), LINEAR),
    "embedding": (lambda w: ag.embedding(w, np.array([[1, 3, 1]])), lambda: (T(4, 3),), LINEAR),
    "masked_fill": (lambda a: ag.masked_fill(a, np.array([False, True, False]), 7.0),
                    lambda: (T(2, 3),), LINEAR),
    "softmax": (ag.softmax, lambda: (T(3, 5),), SMOOTH),
    "log_softmax": (ag.log_softmax, lambda: (T(3, 5),), SMOOTH),
    "sigmoid": (ag.sigmoid, lambda: (T(4, 3, low=-4, high=4),), SMOOTH),
    "silu": (ag.silu, lambda: (T(4, 3, low=-4, high=4),), SMOOTH),
    "relu": (ag.relu, lambda: (away(4, 3),), LINEAR),             # away from 0: locally linear
    "tanh": (ag.tanh, lambda: (T(4, 3),), SMOOTH),
    "gelu": (ag.gelu, lambda: (T(4, 3),), SMOOTH),
    "gelu_tanh": (ag.gelu_tanh, lambda: (T(4, 3),), SMOOTH),
    "cross_entropy": (lambda z: ag.cross_entropy(z, np.array([0, 3, 1])), lambda: (T(3, 5),),
                      SMOOTH),
    "rope": (lambda x: ag.rope(x, *angles(3, 4)), lambda: (T(2, 3, 4),), LINEAR),
    "repeat_kv": (lambda x: ag.repeat_kv(x, 2), lambda: (T(1, 2, 3, 2),), LINEAR),
    "rms_norm": (layers.rms_norm, lambda: (T(2, 3, 4), pos(4)), SMOOTH),
    "linear": (layers.linear, lambda: (T(2, 3), T(3, 4)), SMOOTH),   # bilinear in (x, weight)
    "swiglu": (layers.swiglu, lambda: (T(2, 4), T(4, 6), T(6, 4), T(4, 6)), SMOOTH),
    "attention": (layers.attention, attention_inputs, SMOOTH),
    "transformer_block": (layers.transformer_block, block_inputs, SMOOTH),
}


def test_every_registry_op_with_a_gradient_has_a_taylor_case():
    with_grad = {name for name, op in OPS.items() if op.output == "tensor"}
    assert with_grad == set(OP_CASES)


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_the_taylor_order_of_every_registry_op(name):
    fn, make, kind = OP_CASES[name]
    inputs = make()
    out = fn(*inputs)
    result = taylor_test(fn, *inputs, grad_output=rng.normal(size=out.shape), seed=1)
    if kind == LINEAR:      # the first-order prediction is exact: only round-off is left
        assert result.linear and result.order is None and result.passed, result.remainders
        assert np.all(result.remainders <= 16 * result.roundoff)
    else:
        assert not result.linear and result.order >= 1.8 and result.passed, result
        assert result.order <= 3.2                    # 2, or 3 where d'Hd vanishes


KINKS = {   # not differentiable at x: no gradient predicts both sides, order 1
    "relu at 0": (ag.relu, lambda: Tensor([0.0, 0.0, 1.0, -1.0, 0.0], requires_grad=True)),
    "max with a tie": (ag.max, lambda: Tensor([[2.0, 2.0, 1.0], [0.5, 3.0, 3.0]],
                                              requires_grad=True)),
    "max over an axis with ties": (lambda a: ag.max(a, axis=0),
                                   lambda: Tensor([[1.0, 4.0], [1.0, 4.0]], requires_grad=True)),
}


@pytest.mark.parametrize("name", sorted(KINKS))
def test_the_taylor_order_at_a_kink_is_one(name):
    fn, make = KINKS[name]
    x = make()
    result = taylor_test(fn, x, grad_output=np.ones(fn(x).shape) + 0.5, seed=3)
    assert result.order is not None and 0.8 <= result.order <= 1.2 and not result.passed


def wrong(op, rule, name):
    """`op` with a backward of our own: rule(g, x, out)."""
    def fn(a):
        out = op(Tensor(a.data)).data
        return Tensor._make(out, (a,), name, lambda g: (rule(g, a.data, out),))
    return fn


WRONG = {   # each a mistake students make
    "square without the 2": wrong(lambda t: t * t, lambda g, x, o: g * x, "square"),
    "exp times x": wrong(ag.exp, lambda g, x, o: g * x, "exp"),
    "sigmoid without 1 - s": wrong(ag.sigmoid, lambda g, x, o: g * o, "sigmoid"),
    "softmax without the row sum": wrong(ag.softmax, lambda g, x, o: g * o, "softmax"),
    "tanh as 1 - x²": wrong(ag.tanh, lambda g, x, o: g * (1 - x * x), "tanh"),
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_rule_has_order_one_and_fails_the_adjoint_test(name):
    x = T(3, 4)
    g = rng.normal(size=(3, 4))
    result = taylor_test(WRONG[name], x, grad_output=g)
    assert result.order is not None and result.order <= 1.2 and not result.passed
    assert not adjoint_test(WRONG[name], x, grad_output=g).passed


def test_the_adjoint_test_holds_the_vjp_to_a_jvp_on_layers_and_fails_a_wrong_rule():
    inputs = attention_inputs()
    result = adjoint_test(layers.attention, *inputs, seed=5)
    assert result.passed and abs(result.vjp - result.jvp) <= result.tolerance
    assert result.tolerance < 1e-5 * max(1.0, abs(result.vjp))
    # the same numbers by hand: <J^T u, v> from backward, <u, J v> by central differences
    r = np.random.default_rng(5)
    x = [t for t in inputs[:5]]
    u = r.standard_normal(layers.attention(*inputs).shape)
    v = [r.standard_normal(t.shape) for t in x]
    fresh = [Tensor(t.data, requires_grad=True) for t in x]
    layers.attention(*fresh, *inputs[5:]).backward(u)
    vjp = sum(float(np.sum(t.grad * d)) for t, d in zip(fresh, v, strict=True))
    eps = np.cbrt(2.0 ** -53)

    def at(s):
        moved = [Tensor(t.data + s * d) for t, d in zip(x, v, strict=True)]
        return float(np.sum(layers.attention(*moved, *inputs[5:]).data * u))

    assert result.vjp == pytest.approx(vjp, rel=1e-12)
    assert result.jvp == pytest.approx((at(eps) - at(-eps)) / (2 * eps), rel=1e-12)


def test_the_eps_sweep_falls_as_eps_squared_then_rises_as_one_over_eps():
    x = T(4, 3)
    g = rng.normal(size=(4, 3))
    sweep = eps_sweep(ag.tanh, x, grad_output=g)
    best = int(np.argmin(sweep.error))
    assert sweep.eps[best] == sweep.best_eps and 1e-7 <= sweep.best_eps <= 1e-4
    big = np.log10(sweep.error[:5])                       # truncation: slope 2 per decade
    assert np.polyfit(np.log10(sweep.eps[:5]), big, 1)[0] == pytest.approx(2.0, abs=0.1)
    small = slice(best + 4, None)                          # rounding: about -1 per decade
    slope = np.polyfit(np.log10(sweep.eps[small]), np.log10(sweep.error[small]), 1)[0]
    assert -1.5 <= slope <= -0.5
    assert np.all(sweep.error[small] <= 64 * sweep.rounding[small])   # rounding, bounded
    np.testing.assert_allclose(sweep.truncation[:5], sweep.error[:5], rtol=0.05)
    assert sweep.slope == pytest.approx(float(np.sum(g * (1 - np.tanh(x.data) ** 2)
                                                     * np.random.default_rng(0)
                                                     .standard_normal((4, 3)))), rel=1e-12)
    # float32 needs another eps: its best is about the cube root of 2**-24
    sweep32 = eps_sweep(ag.tanh, x, grad_output=g, float32=True)
    assert 1e-3 <= sweep32.best_eps <= 1e-1 and sweep32.best_error > 1e3 * sweep.best_error


def test_float32_tells_a_wrong_rule_from_rounding_where_plain_differences_cannot():
    """A tanh rule 10 % off, and the right one, in emulated float32, at 20 random points.
    Central differences at the usual eps (1e-6) fail both every time, the right rule by
    errors as large as the wrong one's (rounding hides the mistake). The adjoint test
    tells them apart every time; the Taylor test's order (2 against 1) nearly every time
    (round-off leaves float32 few steps: now and then it says inconclusive)."""
    off = wrong(ag.tanh, lambda g, x, o: 1.1 * g * (1 - o * o), "tanh")
    taylor_right = 0
    for seed in range(20):
        r = np.random.default_rng(seed)
        x = Tensor(r.uniform(0.5, 2.0, (4, 3)), requires_grad=True)
        g = r.normal(size=(4, 3))
        right_fd, wrong_fd = (gradcheck(f, x, grad_output=g, float32=True) for f in (ag.tanh, off))
        assert not right_fd.passed and not wrong_fd.passed
        assert right_fd.inputs[0].max_rel_err > 0.3 * wrong_fd.inputs[0].max_rel_err
        assert adjoint_test(ag.tanh, x, grad_output=g, float32=True).passed
        assert not adjoint_test(off, x, grad_output=g, float32=True).passed
        right_t, wrong_t = (taylor_test(f, x, grad_output=g, float32=True) for f in (ag.tanh, off))
        assert not wrong_t.passed                     # never a wrong rule passed
        taylor_right += (right_t.passed and right_t.order >= 1.8
                         and wrong_t.order is not None and wrong_t.order <= 1.2)
        # with the eps the sweep shows, finite differences in float32 pass the right rule
        best = eps_sweep(ag.tanh, x, grad_output=g, float32=True).best_eps
        assert gradcheck(ag.tanh, x, grad_output=g, float32=True, eps=best, rtol=1e-3,
                         atol=1e-4).passed
    assert taylor_right >= 18


def test_float32_rounds_the_inputs_and_outputs_and_the_engine_stays_float64():
    seen = []

    def spy(a):
        seen.append(a.data.dtype)
        return ag.mul(a, 1.0)

    x = Tensor([0.1], requires_grad=True)               # 0.1 is not a float32 number
    result = taylor_test(spy, x, float32=True)
    assert set(seen) == {np.dtype(np.float64)} and result.linear
    a = adjoint_test(spy, x, float32=True, direction=np.array([1.0]), grad_output=[1.0])
    assert a.vjp == 1.0 and a.jvp == pytest.approx(1.0, rel=1e-3)


def test_the_checks_leave_the_callers_tensors_alone_and_name_bad_arguments():
    x = T(3)
    before = x.data.copy()
    for check in (taylor_test, adjoint_test, eps_sweep):
        check(ag.exp, x)
        assert x.grad is None and np.array_equal(x.data, before)
        with pytest.raises(ValueError, match="no input requires grad"):
            check(ag.exp, Tensor([1.0]))
        with pytest.raises(ValueError, match="grad_output has shape"):
            check(ag.exp, x, grad_output=np.ones(4))
        with pytest.raises(ValueError, match="direction: shape"):
            check(ag.exp, x, direction=np.ones(2))
        with pytest.raises(ValueError, match="not finite"):
            check(lambda a: ag.masked_fill(a, np.array([True, False, False]), -np.inf), x)
    with pytest.raises(ValueError, match="eps must be positive"):
        adjoint_test(ag.exp, x, eps=0.0)
    with pytest.raises(ValueError, match="eps must be positive"):
        eps_sweep(ag.exp, x, eps=[1e-3, -1.0])
    with pytest.raises(TypeError, match="must return a Tensor"):
        taylor_test(lambda a: a.data, x)
