"""relu, tanh, sqrt and gelu (both approximations) against PyTorch's definitions.

Values and gradients (grad_output = ones) come from tests/reference/activation_torch_refs.json,
written by tests/reference/make_activation_torch_refs.py with PyTorch 2.13 in float64; these
tests never import torch. The inputs include the kink and the pole at 0 (relu'(0) = 0,
sqrt'(0) = inf), ±0.0, tiny, huge and infinite values.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from paths import REFERENCE

from glassllm import Tensor
from glassllm import autograd as ag

REFS = json.loads((REFERENCE / "activation_torch_refs.json").read_text())
FNS = {"relu": ag.relu, "tanh": ag.tanh, "sqrt": ag.sqrt, "gelu": ag.gelu,
       "gelu_tanh": ag.gelu_tanh}


def dec(values: list) -> np.ndarray:
    return np.array([float(v) if not isinstance(v, str) else float(v.replace("Infinity", "inf"))
                     for v in values])


@pytest.mark.parametrize("case", REFS["cases"], ids=[c["name"] for c in REFS["cases"]])
def test_value_and_gradient_match_pytorch(case):
    x = Tensor(dec(case["x"]), requires_grad=True)
    out = FNS[case["name"]](x)
    out.backward(np.ones(out.shape))
    np.testing.assert_allclose(out.data, dec(case["value"]), rtol=1e-13, atol=1e-300)
    # 1e-10: at a = -6 the tanh gelu's slope is ½(1 + t) with t ≈ -1, a cancellation that
    # PyTorch's kernel and NumPy round differently (relative 1e-11 of a value 7.7e-10)
    np.testing.assert_allclose(x.grad, dec(case["grad"]), rtol=1e-10, atol=1e-300)


def test_the_gradients_at_zero_are_pytorchs():
    x = Tensor([0.0], requires_grad=True)
    for fn, expected in [(ag.relu, 0.0), (ag.sqrt, math.inf), (ag.tanh, 1.0), (ag.gelu, 0.5),
                         (ag.gelu_tanh, 0.5)]:
        x.grad = None
        fn(x).backward(np.ones(1))
        assert x.grad.tolist() == [expected], fn.__name__


def test_the_two_gelus_differ_and_are_named_as_in_pytorch():
    x = Tensor([-3.0, 1.0])
    exact, approx = ag.gelu(x).data, ag.gelu(x, approximate="tanh").data
    assert np.all(np.abs(exact - approx) > 1e-5)
    np.testing.assert_array_equal(approx, ag.gelu_tanh(x).data)
    # gelu(1) = Φ(1) = ½(1 + erf(1/√2)), the normal cdf at one standard deviation
    assert exact[1] == pytest.approx(0.8413447460685429, rel=1e-15)
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        ag.gelu(x, approximate="erf")


def test_sqrt_of_a_negative_is_nan_with_a_warning_like_log():
    with pytest.warns(RuntimeWarning, match="invalid value"):
        out = ag.sqrt(Tensor([-1.0]))
    assert math.isnan(out.data[0])
