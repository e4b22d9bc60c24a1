"""Every registry op carries its backward rule (H1), and that rule is the `Backward:` block
of the op's own docstring: one text, in one notation (STYLE.md), served as written."""

import inspect
import re

import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox import registry as R
from glassllm.sandbox.registry.vjp import backward_rules, vjp_of
from glassllm_service.app import create_app


def _block(fn) -> list[str]:
    """The raw lines of fn's Backward: block, its header included (read here on its own,
    not through glassllm.sandbox.registry.vjp)."""
    lines = inspect.getdoc(fn).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("Backward"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_every_op_has_a_rule_for_each_differentiable_input_and_no_other():
    for op in R.OPS.values():
        assert set(op.vjp) == set(op.differentiable), op.name
        for name, rule in op.vjp.items():
            assert rule.strip() and "not differentiable" not in rule, (op.name, name)


def test_the_served_rules_are_the_docstrings_backward_blocks_for_every_op():
    """GET /api/v1/ops serves, per input, exactly the text its op's docstring gives it
    (its lines joined), and the docstring names every input it serves."""
    served = {op["name"]: op["vjp"] for op in
              TestClient(create_app()).get("/api/v1/ops").json()["ops"]}
    assert served.keys() == R.OPS.keys()
    for name, op in R.OPS.items():
        assert served[name] == op.vjp, name
        if not op.vjp:  # an ndarray op has no backward (L0.2)
            continue
        text = " ".join(" ".join(_block(op.fn)).split())
        for arg, rule in served[name].items():
            assert re.search(rf"(^|\s){arg}(, \w+)*: {re.escape(rule)}( \w+(, \w+)*:|$)",
                             text), (name, arg, rule)


def test_every_backward_block_is_in_one_notation():
    """`*` (not ⊙ or ·) multiplies, `**` raises to a power (not ² ³), `-` subtracts (not
    −), `ᵀ` swaps the last two axes (not ^T or .T)."""
    for op in R.OPS.values():
        if not op.vjp:
            continue
        for line in _block(op.fn):
            for sign in ("⊙", "·", "²", "³", "−", "½", "^T", ".T "):
                assert sign not in line, (op.name, sign, line)


def test_rules_use_the_field_notation():
    assert R.OPS["matmul"].vjp == {"a": "unbroadcast(g @ bᵀ)", "b": "unbroadcast(aᵀ @ g)"}
    assert R.OPS["mul"].vjp == {"a": "unbroadcast(g * b)", "b": "unbroadcast(g * a)"}
    assert R.OPS["div"].vjp["b"] == "unbroadcast(-g * a / b**2)"
    assert R.OPS["softmax"].vjp["a"] == "out * (g - sum(g * out, axis, keepdims=True))"
    assert R.OPS["relu"].vjp["a"].startswith("where(out <= 0, 0, g)")  # threshold_backward
    assert R.OPS["attention"].vjp["wk"].startswith("the chain rule through its composed")


def test_the_ops_route_serves_no_rule_for_an_ndarray_op():
    body = TestClient(create_app()).get("/api/v1/ops").json()
    by = {op["name"]: op for op in body["ops"]}
    assert by["softmax_np"]["vjp"] == {}          # an ndarray op has no backward (L0.2)


def test_a_block_is_read_line_by_line_and_a_bad_one_refused():
    def op(a, b, ids):
        """An op.

        Backward:
            a: g * b, continued
               on the next line
            b, c: unbroadcast(g)
            ids: not differentiable (L0.6)

        Raises: nothing.
        """

    assert backward_rules(op) == {"a": "g * b, continued on the next line",
                                  "b": "unbroadcast(g)", "c": "unbroadcast(g)",
                                  "ids": "not differentiable (L0.6)"}
    assert vjp_of("op", op, ["a"]) == {"a": "g * b, continued on the next line"}
    with pytest.raises(ValueError, match="no rule for its differentiable input 'ids'"):
        vjp_of("op", op, ["a", "ids"])
    with pytest.raises(ValueError, match="no rule for its differentiable input 'x'"):
        vjp_of("op", op, ["x"])

    def bad(a):
        """Bad.

        Backward:
            the gradient of a is g
        """

    with pytest.raises(ValueError, match="is not 'name: rule'"):
        backward_rules(bad)
