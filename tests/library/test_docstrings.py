"""Every docstring example in the library runs (STYLE: examples are executed by the suite)."""

import doctest
import importlib

import pytest

import glassllm.autograd as ag

MODULES = ["glassllm.tensor", "glassllm.grad_mode", "glassllm.autograd", "glassllm.gradient_check",
           "glassllm.fast.fused"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


@pytest.mark.parametrize("name", ag.__all__)
def test_every_op_docstring_follows_the_template(name):
    doc = getattr(ag, name).__doc__
    assert "Clauses:" in doc, f"{name}: no clause ids"
    if name not in {"softmax_np", "cross_entropy_grad"}:  # they return ndarrays, no backward
        assert "Backward:" in doc, f"{name}: no Backward block"
