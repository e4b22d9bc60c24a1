"""Numerical behaviour the contract names (L1.2, L3, L4, L5) and NumPy error rules (L0.4)."""

import warnings

import numpy as np
import pytest

from glassllm import Tensor
from glassllm import autograd as ag


def causal_mask(n):
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def test_masked_causal_softmax_gradient_is_finite_and_zero_at_masked_positions():
    rng = np.random.default_rng(1)
    scores = Tensor(rng.normal(size=(2, 4, 4)), requires_grad=True)
    mask = causal_mask(4)
    p = ag.softmax(ag.masked_fill(scores, mask, -np.inf))
    assert np.all(p.data[:, mask] == 0.0)
    np.testing.assert_allclose(p.data.sum(-1), 1.0, rtol=1e-15)
    p.backward(rng.normal(size=p.shape))
    assert np.isfinite(scores.grad).all()
    assert np.all(scores.grad[:, mask] == 0.0)
    # the first query sees only itself: probability exactly 1, gradient exactly 0
    assert np.all(p.data[:, 0, 0] == 1.0)
    assert np.all(scores.grad[:, 0, 0] == 0.0)


def test_fully_masked_row_gives_nan_as_the_contract_allows():
    with np.errstate(invalid="ignore"):
        p = ag.softmax(ag.masked_fill(Tensor(np.zeros((1, 2))), np.ones((1, 2), bool), -np.inf))
    assert np.isnan(p.data).all()


@pytest.mark.parametrize("big", [1000.0, 5e3])
def test_cross_entropy_with_huge_logits_is_exact(big):
    logits = Tensor([[big, -big, 0.0], [-big, big, big]], requires_grad=True)
    targets = np.array([1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise", under="ignore"):
            loss = ag.cross_entropy(logits, targets)
            loss.backward()
    # row 0: -log p[1] = 2 big (exp(-2 big) underflows in the sum); row 1: log 2
    np.testing.assert_allclose(loss.data, (2 * big + np.log(2.0)) / 2, rtol=1e-15)
    expected = np.array([[1.0, -1.0, 0.0], [0.0, 0.5, -0.5]]) / 2
    np.testing.assert_allclose(logits.grad, expected, atol=1e-300)
    assert np.isfinite(logits.grad).all()


@pytest.mark.parametrize("fn", [ag.sigmoid, ag.silu])
def test_sigmoid_and_silu_extremes_raise_no_warning_and_hit_exact_limits(fn):
    x = Tensor([-1e4, -750.0, 0.0, 750.0, 1e4], requires_grad=True)
    with np.errstate(all="raise"):
        out = fn(x)
        out.backward(np.ones(5))
    s = np.array([0.0, 0.0, 0.5, 1.0, 1.0])
    expected = s if fn is ag.sigmoid else x.data * s
    assert out.data.tolist() == expected.tolist()
    expected_grad = s * (1 - s) if fn is ag.sigmoid else s + x.data * s * (1 - s)
    assert x.grad.tolist() == expected_grad.tolist()


def test_sigmoid_matches_the_textbook_formula_in_the_safe_range():
    x = np.linspace(-30, 30, 61)
    np.testing.assert_allclose(ag.sigmoid(Tensor(x)).data, 1 / (1 + np.exp(-x)), rtol=1e-14)


def test_sigmoid_gives_the_bits_of_the_select_on_the_sign():
    """exp(min(x, 0)) / (1 + exp(-|x|)) is where(x >= 0, r, exp(-|x|)·r) bit for bit
    (the select cost ~10x the arithmetic, so it went)."""
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.normal(size=4000) * scale for scale in (1, 10, 100, 1000)]
                       + [[0.0, -0.0, 1e-300, -1e-300, 744.9, -744.9, 746.0, -746.0, 1e308,
                           -1e308]])
    with np.errstate(under="ignore"):
        e = np.exp(-np.abs(x))
    r = 1.0 / (1.0 + e)
    select = np.where(x >= 0, r, e * r)
    assert np.array_equal(ag.sigmoid(Tensor(x)).data.view(np.int64), select.view(np.int64))


def test_embedding_negative_and_repeated_ids_accumulate_into_the_right_rows():
    weight = Tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    ids = np.array([[-1, 3, 0], [0, -4, 2]])  # -1 is row 3, -4 is row 0
    out = ag.embedding(weight, ids)
    assert out.shape == (2, 3, 2)
    np.testing.assert_array_equal(out.data[0, 0], [6.0, 7.0])
    np.testing.assert_array_equal(out.data[1, 1], [0.0, 1.0])
    g = np.arange(12.0).reshape(2, 3, 2)
    out.backward(g)
    expected = np.zeros((4, 2))
    for (i, j), row in np.ndenumerate(ids):
        expected[row] += g[i, j]
    np.testing.assert_array_equal(weight.grad, expected)
    assert weight.grad[3].tolist() == [0 + 2, 1 + 3]  # ids -1 and 3


def test_embedding_rejects_bad_ids():
    w = Tensor(np.zeros((4, 2)))
    with pytest.raises(IndexError):
        ag.embedding(w, np.array([7]))
    with pytest.raises(TypeError, match="ids must be integers"):
        ag.embedding(w, np.array([1.0]))
    with pytest.raises(TypeError, match="ids must be integers"):
        ag.embedding(w, np.array([True]))


@pytest.mark.parametrize("shape", [(4,), (4, 2, 3), ()])
def test_embedding_weight_must_be_a_2d_table(shape):
    """L3.1: weight is (V, d), one row per id; PyTorch's F.embedding refuses any other
    ("'weight' must be 2-D"). A 1-D table used to answer with single numbers."""
    from glassllm.errors import ShapeError
    with pytest.raises(ShapeError, match=r"weight must have shape \(V, d\)") as info:
        ag.embedding(Tensor(np.zeros(shape)), np.array([0]))
    assert info.value.input == "weight"


def test_log_of_zero_is_minus_inf_with_a_warning_not_an_exception():
    x = Tensor([0.0, -1.0, 1.0], requires_grad=True)
    with pytest.warns(RuntimeWarning):
        y = ag.log(x)
    assert y.data[0] == -np.inf and np.isnan(y.data[1]) and y.data[2] == 0.0
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        y.backward(np.ones(3))
    assert x.grad[0] == np.inf and x.grad[2] == 1.0


def test_division_by_zero_and_exp_overflow_follow_ieee():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert ag.div(Tensor([1.0]), Tensor([0.0])).data[0] == np.inf
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert ag.exp(Tensor([1000.0])).data[0] == np.inf  # no clipping (L1.2)


def test_pow_zero_exponent_has_zero_gradient_even_at_zero():
    x = Tensor([0.0, 2.0], requires_grad=True)
    ag.pow(x, 0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_pow_rejects_a_differentiable_exponent():
    with pytest.raises(TypeError, match=r"L0\.6"):
        ag.pow(Tensor([2.0]), Tensor([2.0], requires_grad=True))


def test_max_ties_split_the_gradient_equally():
    x = Tensor([[1.0, 5.0, 5.0, 5.0], [2.0, 2.0, 0.0, 1.0]], requires_grad=True)
    ag.max(x, axis=1).backward(np.array([3.0, 1.0]))
    np.testing.assert_allclose(x.grad, [[0, 1, 1, 1], [0.5, 0.5, 0, 0]])


def test_log_softmax_matches_log_of_softmax_and_is_stable():
    x = np.array([[1.0, 2.0, 3.0], [1e4, 0.0, -1e4]])
    np.testing.assert_allclose(
        ag.log_softmax(Tensor(x)).data[0], np.log(ag.softmax_np(x)[0]), rtol=1e-14
    )
    assert ag.log_softmax(Tensor(x)).data[1].tolist() == [0.0, -1e4, -2e4]


def test_cross_entropy_grad_does_not_modify_logits_and_validates():
    logits = np.array([[1.0, 2.0], [3.0, 0.0]])
    before = logits.copy()
    g = ag.cross_entropy_grad(logits, np.array([0, 1]))
    assert np.array_equal(logits, before) and isinstance(g, np.ndarray)
    np.testing.assert_allclose(g.sum(axis=1), 0.0, atol=1e-16)
    with pytest.raises(TypeError, match="targets must be integers"):
        ag.cross_entropy(Tensor(logits), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"targets must have shape \(N,\)"):
        ag.cross_entropy(Tensor(logits), np.array([0, 1, 1]))
    with pytest.raises(IndexError):
        ag.cross_entropy(Tensor(logits), np.array([0, 2]))


def test_rope_backward_is_the_transposed_rotation_and_preserves_norms():
    rng = np.random.default_rng(3)
    theta = rng.uniform(-3, 3, size=(5, 3))
    x = Tensor(rng.normal(size=(2, 2, 5, 6)), requires_grad=True)
    out = ag.rope(x, np.cos(theta), np.sin(theta))
    pairs = lambda a: np.hypot(a[..., 0::2], a[..., 1::2])  # noqa: E731
    np.testing.assert_allclose(pairs(out.data), pairs(x.data), rtol=1e-13)
    g = rng.normal(size=out.shape)
    out.backward(g)
    # a rotation's transpose is its inverse: rotating g back by -theta
    back = ag.rope(Tensor(g), np.cos(-theta), np.sin(-theta)).data
    np.testing.assert_allclose(x.grad, back, rtol=1e-13)
    with pytest.raises(ValueError, match="even length"):
        ag.rope(Tensor(np.ones((2, 3))), np.ones((2, 1)), np.ones((2, 1)))


def test_repeat_kv_order_and_validation():
    x = Tensor(np.arange(2 * 3).reshape(1, 3, 1, 2), requires_grad=True)
    out = ag.repeat_kv(x, 2)
    assert out.shape == (1, 6, 1, 2)
    assert out.data[0, :, 0, 0].tolist() == [0, 0, 2, 2, 4, 4]
    for bad, err in [(0, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError)]:
        with pytest.raises(err, match="repeats must be a positive int"):
            ag.repeat_kv(x, bad)
    with pytest.raises(ValueError, match=r"\(B, Hkv, n, dk\)"):
        ag.repeat_kv(Tensor(np.ones((2, 2))), 2)


def test_where_and_masked_fill_require_boolean_masks():
    with pytest.raises(TypeError, match="condition must be a boolean mask"):
        ag.where(np.array([1, 0]), Tensor([1.0, 2.0]), 0.0)
    with pytest.raises(TypeError, match="mask must be a boolean mask"):
        ag.masked_fill(Tensor([1.0, 2.0]), np.array([1, 0]), 0.0)
    x = Tensor([1.0, 2.0], requires_grad=True)
    ag.masked_fill(x, np.array([True, False]), 9.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    "call, err",
    [
        (lambda: ag.add(Tensor(np.ones((2, 3))), Tensor(np.ones((4,)))), ValueError),
        (lambda: ag.matmul(Tensor(np.ones((2, 3))), Tensor(np.ones((4, 2)))), ValueError),
        (lambda: ag.tsum(Tensor(np.ones((2, 3))), axis=2), np.exceptions.AxisError),
        (lambda: ag.reshape(Tensor(np.ones((2, 3))), (4, 2)), ValueError),
        (lambda: ag.getitem(Tensor(np.ones(3)), 5), IndexError),
        (lambda: ag.softmax(Tensor(np.ones(3)), axis=1), np.exceptions.AxisError),
    ],
)
def test_shape_axis_and_index_errors_are_numpys(call, err):
    with pytest.raises(err):
        call()


@pytest.mark.parametrize(
    "ids_shape, d",
    # small: np.add.at itself; (300,) x 20 and (16, 40) x 9 pass _AT_ELEMENTS (4096): the
    # sorted reduceat path
    [((20,), 3), ((4, 6), 3), ((0,), 3), ((2, 3, 4), 3), ((300,), 20), ((16, 40), 9)],
)
def test_embedding_backward_equals_np_add_at(ids_shape, d):
    rng = np.random.default_rng(7)
    weight = Tensor(rng.normal(size=(7, d)), requires_grad=True)
    ids = rng.integers(-7, 7, size=ids_shape)
    out = ag.embedding(weight, ids)
    g = rng.normal(size=out.shape)
    out.backward(g)
    expected = np.zeros((7, d))
    np.add.at(expected, ids, g)
    np.testing.assert_allclose(weight.grad, expected, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("repeats", [1, 3, 8, 9])
def test_embedding_backward_by_rank_is_np_add_at_bit_for_bit(repeats):
    """A large scatter whose ids repeat at most 8 times adds the first rows of all ids,
    then the second rows...: add.at's sums in add.at's order (9 repeats: reduceat)."""
    rng = np.random.default_rng(repeats)
    ids = rng.permutation(np.repeat(np.arange(64), repeats))[: 64 * repeats].reshape(-1, 8)
    ids[0, 0] -= 64  # a negative id counts from the end
    weight = Tensor(rng.normal(size=(64, 16)), requires_grad=True)
    out = ag.embedding(weight, ids)
    g = rng.normal(size=out.shape)
    out.backward(g)
    expected = np.zeros((64, 16))
    np.add.at(expected, ids, g)
    if repeats <= 8:
        assert np.array_equal(weight.grad, expected)
    np.testing.assert_allclose(weight.grad, expected, rtol=1e-14, atol=1e-15)


def test_reflected_pow_with_constant_base():
    t = Tensor([0.0, 1.0, 2.0], requires_grad=True)
    out = np.array([[2.0], [-2.0], [0.0]]) ** t  # broadcasts t up to (3, 3)
    assert out.data.tolist() == [[1, 2, 4], [1, -2, 4], [1, 0, 0]]
    with pytest.warns(RuntimeWarning, match="invalid value"):  # log(-2) is NaN, as in PyTorch
        out.backward(np.array([[1.0, 1, 1], [0, 0, 0], [1, 1, 1]]))
    # d/dt 2**t = 2**t log 2; the base-0 row contributes 0; the -2 row contributes 0 * NaN
    np.testing.assert_array_equal(np.isnan(t.grad), [True, True, True])
    t2 = Tensor([0.5, 3.0], requires_grad=True)
    (2.0**t2).sum().backward()
    np.testing.assert_allclose(t2.grad, 2.0 ** t2.data * np.log(2.0), rtol=1e-15)
    z = Tensor([2.0], requires_grad=True)
    (0.0**z).sum().backward()
    assert z.grad.tolist() == [0.0]


def test_tensor_data_must_be_real_numbers():
    for bad in [1 + 2j, "3", None, {"a": 1}, np.array([1 + 0j])]:
        with pytest.raises(TypeError, match="real numbers"):
            Tensor(bad)
    with pytest.raises(ValueError):
        Tensor([[1, 2], [3]])


def test_mean_equals_numpy_bit_for_bit_and_empty_means_warn_only_through_errstate():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(3, 4, 5))
    for axis in [None, 0, -1, (0, 2)]:
        assert np.array_equal(ag.mean(Tensor(x), axis=axis).data, np.mean(x, axis=axis))
    # "Mean of empty slice" would come from the warnings module, whose state is global;
    # glassllm's empty mean is a floating-point 0/0, reported through np.errstate (H6).
    seen = []
    with np.errstate(all="call", call=lambda kind, flag: seen.append(kind)):
        out = ag.mean(Tensor(np.zeros((0, 3))), axis=0)
        loss = ag.cross_entropy(Tensor(np.zeros((0, 2))), np.zeros(0, dtype=int))
    assert np.isnan(out.data).all() and out.shape == (3,)
    assert np.isnan(loss.data)  # L5.3: an empty batch may give NaN
    assert seen == ["invalid value", "invalid value"]


def test_matmul_backward_for_a_shared_weight_never_builds_per_batch_outer_products():
    """x (B, n, k) @ w (k, m): dL/dw is one (k, B·n) @ (B·n, m) product, not B (k, m)
    products summed afterwards — the difference between 80 KB and 8 MB here."""
    import tracemalloc

    rng = np.random.default_rng(5)
    x = Tensor(rng.normal(size=(200, 1, 50)), requires_grad=True)
    w = Tensor(rng.normal(size=(50, 100)), requires_grad=True)
    y = ag.matmul(x, w)
    g = rng.normal(size=y.shape)
    tracemalloc.start()
    y.backward(g)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1_000_000, peak  # a (200, 50, 100) float64 intermediate is 8 MB
    np.testing.assert_allclose(w.grad, np.einsum("bnk,bnm->km", x.data, g), rtol=1e-12)


def test_pow_uses_pytorchs_exact_short_forms_for_common_exponents():
    x = np.random.default_rng(2).uniform(0.1, 3.0, size=50)
    t = Tensor(x)
    assert np.array_equal(ag.pow(t, 3).data, x * x * x)  # what torch computes for x ** 3
    assert np.array_equal(ag.pow(t, 2).data, x * x)
    assert np.array_equal(ag.pow(t, -2).data, 1.0 / (x * x))
    assert np.array_equal(ag.pow(t, 0.5).data, np.sqrt(x))
    assert np.array_equal(ag.pow(t, -0.5).data, 1.0 / np.sqrt(x))
    assert np.array_equal(ag.pow(t, 1.7).data, x**1.7)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        assert ag.pow(Tensor([0.0]), -0.5).data[0] == np.inf


def test_sigmoid_and_silu_of_a_0d_tensor():
    for fn, expected in [(ag.sigmoid, 1 / (1 + np.exp(-0.5))), (ag.silu, 0.5 / (1 + np.exp(-0.5)))]:
        x = Tensor(0.5, requires_grad=True)
        out = fn(x)
        out.backward()
        assert out.shape == () and np.isclose(out.item(), expected, rtol=1e-15)
        assert x.grad.shape == ()


def test_rope_tables_must_broadcast_to_the_pairs_of_x():
    x = Tensor([[1.0, 2.0]], requires_grad=True)
    with pytest.raises(ValueError, match=r"must broadcast to the pairs of x, \(1, 1\)"):
        ag.rope(x, np.ones((1, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError):
        ag.rope(x, np.ones((2, 1)), np.zeros((2, 1)))  # 2 positions for 1


def test_inputs_that_are_not_tensors_are_copied_so_later_changes_cannot_move_gradients():
    """Masks, ids, indices, targets, tables and exponents held by the caller (QA repro)."""
    mask = np.array([True, False])
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = ag.masked_fill(a, mask, 0.0)
    mask[:] = [False, True]
    y.sum().backward()
    assert a.grad.tolist() == [0.0, 1.0]

    ids = np.array([0])
    w = Tensor(np.zeros((3, 1)), requires_grad=True)
    y = ag.embedding(w, ids)
    ids[0] = 2
    y.sum().backward()
    assert w.grad.ravel().tolist() == [1.0, 0.0, 0.0]

    index = np.array([0, 0])
    v = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ag.getitem(v, (index,))
    index[:] = 2
    y.sum().backward()
    assert v.grad.tolist() == [2.0, 0.0, 0.0]

    targets = np.array([1])
    z = Tensor([[0.0, 0.0]], requires_grad=True)
    y = ag.cross_entropy(z, targets)
    targets[0] = 0
    y.backward()
    assert z.grad.tolist() == [[0.5, -0.5]]

    cos, sin = np.ones((1, 1)), np.zeros((1, 1))
    r = Tensor([[1.0, 0.0]], requires_grad=True)
    y = ag.rope(r, cos, sin)
    cos[:], sin[:] = 0.0, 1.0
    y.backward(np.array([[1.0, 0.0]]))
    assert r.grad.tolist() == [[1.0, 0.0]]

    p = np.array([2.0, 2.0])
    b = Tensor([3.0, 4.0], requires_grad=True)
    y = ag.pow(b, p)
    p[:] = 1.0
    y.sum().backward()
    assert b.grad.tolist() == [6.0, 8.0]


def test_max_with_nan_gives_nan_gradients_for_that_slice_like_pytorch():
    x = Tensor([[1.0, np.nan, 3.0], [1.0, 5.0, 5.0]], requires_grad=True)
    out = ag.max(x, axis=1)
    assert np.isnan(out.data[0]) and out.data[1] == 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the NaN spreads quietly: no divide by zero of the
        out.backward(np.ones(2))         # op's own (a fresh QA pass found one reported)
    assert np.isnan(x.grad[0]).all()
    assert x.grad[1].tolist() == [0.0, 0.5, 0.5]


def test_max_of_a_nan_over_the_service_warns_of_nothing_the_student_did_not_write():
    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app
    with TestClient(create_app()) as c:
        body = c.post("/api/v1/ops/max", json={"inputs": {"a": ["NaN", 1.0]}}).json()
    assert body["value"] == "NaN" and body["grads"] == {"a": ["NaN", "NaN"]}
    assert body["warnings"] == []


def test_zero_base_power_gradient_follows_pytorch():
    t = Tensor([-1.0, 0.0, 2.0], requires_grad=True)
    with pytest.warns(RuntimeWarning, match="divide by zero"):  # 0 ** -1 = inf
        out = 0.0**t
        out.backward(np.ones(3))
    assert out.data.tolist() == [np.inf, 1.0, 0.0]
    assert t.grad.tolist() == [-np.inf, 0.0, 0.0]  # inf * log(0) = -inf; 0 where t >= 0


@pytest.mark.parametrize("repeats", [1, 2, 3, 7])
def test_repeat_kv_backward_is_exactly_the_sum_over_the_copies(repeats):
    """L6.3: the backward adds the copies one contiguous slice at a time; the
    result is bit for bit `g.reshape(B, Hkv, repeats, n, dk).sum(axis=2)`, and the leaf
    owns it."""
    rng = np.random.default_rng(repeats)
    x = Tensor(rng.normal(size=(2, 3, 5, 8)), requires_grad=True)
    g = rng.normal(size=(2, 3 * repeats, 5, 8))
    ag.repeat_kv(x, repeats).backward(g)
    np.testing.assert_array_equal(x.grad, g.reshape(2, 3, repeats, 5, 8).sum(axis=2))
    assert x.grad.flags.writeable and not np.shares_memory(x.grad, g)


def test_relu_keeps_negative_zero_and_passes_the_gradient_at_nan_like_pytorch():
    """L4.2: torch.relu(-0.0) is -0.0 and NaN propagates; its backward is
    threshold_backward, where(out <= 0, 0, g): g passes at NaN, and an infinite g at a
    blocked position gives 0, not NaN (PyTorch 2.13's numbers)."""
    x = Tensor([-0.0, np.nan, -1.0, 2.0, 0.0], requires_grad=True)
    out = ag.relu(x)
    out.backward(np.array([1.0, 1.0, np.inf, 1.0, 5.0]))
    np.testing.assert_array_equal(out.data, [-0.0, np.nan, 0.0, 2.0, 0.0])
    assert np.signbit(out.data).tolist() == [True, False, False, False, False]
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_max_and_softmax_of_a_0d_tensor_over_axis_0_like_pytorch():
    """L2.5, L4.1: a 0-d input reduced over axis 0 / -1 is itself (torch.amax(t, 0) = t,
    torch.softmax(t, -1) = 1 with gradient 0); another axis is NumPy's AxisError."""
    for keepdims in (False, True):
        x = Tensor(2.5, requires_grad=True)
        out = ag.max(x, axis=0, keepdims=keepdims)
        out.backward()
        assert out.data.shape == () and out.item() == 2.5 and x.grad.tolist() == 1.0
    x = Tensor(3.0, requires_grad=True)
    out = ag.softmax(x)
    out.backward()
    assert out.item() == 1.0 and x.grad.tolist() == 0.0
    assert ag.softmax_np(3.0).tolist() == 1.0
    with pytest.raises(np.exceptions.AxisError):
        ag.softmax(Tensor(3.0), axis=1)


def test_embedding_backward_sums_into_zeros_on_both_paths():
    """L3.3: a row whose contributions are all -0.0 sums to +0.0 (0.0 + ...), as np.add.at
    does, on the np.add.at path (4096 elements) and the sorted path (4097)."""
    for n in (4096, 4097):
        weight = Tensor(np.zeros((3, 1)), requires_grad=True)
        ag.embedding(weight, np.zeros(n, dtype=np.int64)).backward(np.full((n, 1), -0.0))
        assert not np.signbit(weight.grad[0, 0])


def test_mean_over_one_axis_without_keepdims_spreads_the_gradient_along_that_axis():
    a = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    out = ag.mean(a, axis=1)                                 # (2,)
    out.backward(np.array([3.0, 6.0]))
    np.testing.assert_array_equal(a.grad, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])


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
