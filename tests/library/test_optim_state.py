"""Optimizer state per parameter, tied parameters, optimizer state_dict and clipping of
non-finite gradients, against PyTorch 2.13's numbers.

The reference values come from tests/reference/make_optim_refs.py (run with torch);
this file does not import torch.
"""

import json
import math

import numpy as np
import pytest
from paths import REFERENCE

from glassllm import Tensor
from glassllm.optim import SGD, AdamW, clip_grad_norm, unique_parameters

REFS = json.loads((REFERENCE / "optim_refs.json").read_text())
OPTIMIZERS = {"AdamW": AdamW, "SGD": SGD}


def _floats(x):
    """JSON lists with 'nan'/'inf' strings back to a float array."""
    return np.array(np.vectorize(float)(np.array(x, dtype=object)), dtype=np.float64)


def _make(case, params):
    kwargs = dict(case["kwargs"])
    if "betas" in kwargs:
        kwargs["betas"] = tuple(kwargs["betas"])
    return OPTIMIZERS[case["optimizer"]](params, **kwargs)


def _set_grads(params, grads):
    for p, g in zip(params, grads, strict=True):
        p.grad = None if g is None else np.array(g)


@pytest.mark.parametrize("case", REFS["optimizers"], ids=lambda c: c["optimizer"])
def test_late_and_skipped_parameters_match_pytorch(case):
    # p0 skips step 3, p1 first has a gradient at step 3, p2 never has one.
    params = [Tensor(w, requires_grad=True) for w in case["init"]]
    opt = _make(case, params)
    steps = zip(case["grads"], case["after_each_step"], strict=True)
    for step, (grads, expected) in enumerate(steps):
        _set_grads(params, grads)
        opt.step()
        for i, (p, e) in enumerate(zip(params, expected, strict=True)):
            np.testing.assert_allclose(
                p.data, e, rtol=1e-12, atol=1e-14, err_msg=f"param {i} after step {step}"
            )
    np.testing.assert_array_equal(params[2].data, case["init"][2])  # never touched, no decay
    if case["optimizer"] == "AdamW":
        assert {str(i): s["step"] for i, s in opt.state.items()} == case["final_steps"]
        assert 2 not in opt.state  # no gradient ever: no state at all


def test_adamw_late_parameter_first_step_is_lr_sized():
    # A parameter whose first gradient comes at step 5 gets t = 1: |update| = lr·|g|/(|g|+eps).
    a, b = Tensor([0.0], requires_grad=True), Tensor([0.0], requires_grad=True)
    opt = AdamW([a, b], lr=0.1, weight_decay=0.0)
    for _ in range(4):
        a.grad, b.grad = np.array([1.0]), None
        opt.step()
    a.grad, b.grad = np.array([1.0]), np.array([2.0])
    opt.step()
    assert b.data[0] == pytest.approx(-0.1 * 2.0 / (2.0 + 1e-8), abs=1e-15)
    assert opt.state[0]["step"] == 5 and opt.state[1]["step"] == 1


def test_skipped_parameter_gets_no_weight_decay():
    for opt_cls, kwargs in [
        (AdamW, {"weight_decay": 0.5}),
        (SGD, {"weight_decay": 0.5, "momentum": 0.9}),
    ]:
        p, q = Tensor([2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
        opt = opt_cls([p, q], lr=0.1, **kwargs)
        p.grad = np.array([1.0])
        opt.step()
        opt.step()  # q has grad None both times; p's grad is still there the second time
        assert q.data.tolist() == [3.0]
        assert 1 not in opt.state


def test_sgd_first_step_has_no_dampening():
    p = Tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=1.0, momentum=0.5, dampening=0.5)
    p.grad = np.array([2.0])
    opt.step()  # buf = g = 2 (not 0.5·2)
    assert p.data.tolist() == [-1.0]
    opt.step()  # buf = 0.5·2 + 0.5·2 = 2
    assert p.data.tolist() == [-3.0]


@pytest.mark.parametrize("case", REFS["tied"], ids=lambda c: c["optimizer"])
def test_tied_parameter_listed_twice_steps_once(case):
    w = Tensor(case["init"][0], requires_grad=True)
    b = Tensor(case["init"][1], requires_grad=True)
    opt = _make(case, [w, b, w])  # w twice: one parameter
    assert len(opt.params) == 2
    for grads, expected in zip(case["grads"], case["after_each_step"], strict=False):
        _set_grads([w, b], grads)
        opt.step()
        np.testing.assert_allclose(w.data, expected[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b.data, expected[1], rtol=1e-12, atol=1e-14)


def test_unique_parameters_is_by_identity_and_names_bad_items():
    a = Tensor([1.0], requires_grad=True)
    equal = Tensor([1.0], requires_grad=True)
    assert [id(p) for p in unique_parameters([a, equal, a, equal])] == [id(a), id(equal)]
    with pytest.raises(TypeError, match=r"params\[1\] must be a Tensor, got ndarray"):
        unique_parameters([a, np.zeros(1)])
    with pytest.raises(TypeError, match="single Tensor"):
        AdamW(a)


# --- state_dict ---------------------------------------------------------------------------


def _run(opt, params, grads):
    for step_grads in grads:
        _set_grads(params, step_grads)
        opt.step()


@pytest.mark.parametrize("case", REFS["optimizers"], ids=lambda c: c["optimizer"])
def test_state_dict_round_trip_resumes_exactly(case):
    # Stop after 3 steps (p1 has no state yet), save, rebuild, load, continue: PyTorch's
    # numbers after every later step, bit for bit the same as an uninterrupted run.
    params = [Tensor(w, requires_grad=True) for w in case["init"]]
    opt = _make(case, params)
    _run(opt, params, case["grads"][:3])
    saved = json.loads(json.dumps(opt.state_dict(), default=lambda a: a.tolist()))  # JSON-safe
    opt.state.clear()  # the saved copy must not share arrays with the live state
    params2 = [Tensor(p.data, requires_grad=True) for p in params]
    fresh = _make({**case, "kwargs": {**case["kwargs"], "lr": 123.0}}, params2)
    fresh.load_state_dict(saved)
    assert fresh.lr == case["kwargs"]["lr"]  # settings come back too, as in torch
    for grads, expected in zip(case["grads"][3:], case["after_each_step"][3:], strict=False):
        _set_grads(params2, grads)
        fresh.step()
        for p, e in zip(params2, expected, strict=True):
            np.testing.assert_allclose(p.data, e, rtol=1e-12, atol=1e-14)


def test_state_dict_arrays_are_copies():
    p = Tensor([1.0], requires_grad=True)
    opt = AdamW([p])
    p.grad = np.array([1.0])
    opt.step()
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"][0] = 99.0
    assert opt.state[0]["exp_avg"][0] == pytest.approx(0.1)
    assert sd["state"][0]["step"] == 1 and sd["param_groups"][0]["params"] == [0]


def test_load_state_dict_mismatch_is_a_clear_error_and_changes_nothing():
    a, b = Tensor(np.zeros((2, 3)), requires_grad=True), Tensor(np.zeros(4), requires_grad=True)
    opt = AdamW([a, b], lr=0.1)
    a.grad, b.grad = np.ones((2, 3)), np.ones(4)
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(ValueError, match=r"holds 2 parameters, this optimizer has 1"):
        AdamW([a]).load_state_dict(sd)
    swapped = AdamW([b, a], lr=0.5)
    with pytest.raises(
        ValueError,
        match=r"state\[0\]\['exp_avg'\] has shape \(2, 3\), "
        r"parameter 0 has shape \(4,\)",
    ):
        swapped.load_state_dict(sd)
    assert swapped.lr == 0.5 and swapped.state == {}  # untouched
    bad_step = opt.state_dict()
    bad_step["state"][1]["step"] = 1.5
    with pytest.raises(ValueError, match=r"state\[1\]\['step'\] must be an integer >= 1"):
        opt.load_state_dict(bad_step)
    bad_key = opt.state_dict()
    bad_key["state"][5] = bad_key["state"].pop(1)
    with pytest.raises(ValueError, match=r"state key 5 is not a parameter index 0\.\.1"):
        opt.load_state_dict(bad_key)
    sgd_sd = SGD([a, b], momentum=0.9).state_dict()
    unknown = r"unknown settings \['dampening', 'momentum', 'nesterov'\]"
    with pytest.raises(ValueError, match=unknown):
        opt.load_state_dict(sgd_sd)


# --- hyper-parameters are checked, bools are not numbers (item 8) ---------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: AdamW(p, lr=-1e-3), "lr must be a finite number >= 0.0, got -0.001"),
        (lambda p: AdamW(p, lr=math.nan), "lr must be a finite number"),
        (lambda p: AdamW(p, lr=True), "lr must be a real number, got bool True"),
        (lambda p: AdamW(p, lr="0.1"), "lr must be a real number, got str"),
        (lambda p: AdamW(p, betas=(0.9, 1.0)), r"betas\[1\] must be a finite number >= 0.0 and <"),
        (lambda p: AdamW(p, betas=0.9), "betas must be a pair"),
        (lambda p: AdamW(p, eps=-1.0), "eps must be"),
        (lambda p: AdamW(p, weight_decay=math.inf), "weight_decay must be"),
        (lambda p: SGD(p, momentum=-0.5), "momentum must be"),
        (lambda p: SGD(p, nesterov=True), "nesterov momentum requires momentum > 0"),
        (lambda p: SGD(p, momentum=0.9, nesterov=1), "nesterov must be True or False"),
    ],
)
def test_optimizer_settings_are_checked(make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        make([Tensor([1.0], requires_grad=True)])


# --- clip_grad_norm: PyTorch's numbers, non-finite gradients, tied parameters -------------


@pytest.mark.parametrize("case", REFS["clip_grad_norm"], ids=lambda c: c["label"])
def test_clip_grad_norm_matches_pytorch(case):
    grads = [_floats(g) for g in case["grads"]]
    params = [Tensor(np.zeros(g.shape), requires_grad=True) for g in grads]
    for p, g in zip(params, grads, strict=False):
        p.grad = g
    norm = clip_grad_norm(params, case["max_norm"])
    expected_norm = float(case["norm"])
    assert norm == pytest.approx(expected_norm, rel=1e-14, nan_ok=True)
    for p, e in zip(params, case["clipped"], strict=False):
        np.testing.assert_allclose(p.grad, _floats(e), rtol=1e-14, atol=0)  # NaN == NaN here
    for p, g in zip(params, grads, strict=False):
        p.grad = g
    if case["error_if_nonfinite_raises"]:
        with pytest.raises(RuntimeError, match=f"total norm of the gradients is {norm}"):
            clip_grad_norm(params, case["max_norm"], error_if_nonfinite=True)
        for p, g in zip(params, grads, strict=False):  # raised before changing anything
            np.testing.assert_array_equal(p.grad, g)
    else:
        assert clip_grad_norm(params, case["max_norm"], error_if_nonfinite=True) == norm


def test_clip_grad_norm_counts_a_tied_parameter_once():
    w = Tensor(np.zeros(2), requires_grad=True)
    w.grad = np.array([3.0, 4.0])
    assert clip_grad_norm([w, w], 1.0) == 5.0  # not sqrt(50)
    np.testing.assert_allclose(w.grad, [0.6, 0.8], rtol=1e-6)  # scaled once, not twice


def test_clip_grad_norm_checks_max_norm():
    w = Tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"max_norm must be a finite number >= 0\.0, got nan"):
        clip_grad_norm([w], math.nan)
    with pytest.raises(TypeError, match="max_norm must be a real number, got bool"):
        clip_grad_norm([w], True)
