"""Every docstring example of both packages runs (STYLE: examples are executed by the suite),
and every op's docstring follows the template. `make doctest` (a CI stage) runs the same
examples through pytest's doctest collector."""

import doctest
import importlib
import pkgutil

import pytest

import glassllm
import glassllm.autograd as ag
import glassllm_service


def every_module() -> list[str]:
    names = []
    for package in (glassllm, glassllm_service):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(names)


@pytest.mark.parametrize("name", every_module())
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
