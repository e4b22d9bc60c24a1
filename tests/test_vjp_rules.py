"""Every registry op carries its backward rule as data (issue 14, item 1; H1)."""

from fastapi.testclient import TestClient

from glassllm import registry as R
from service.app import create_app


def test_every_op_has_a_rule_for_each_differentiable_input_and_no_other():
    for op in R.OPS.values():
        assert set(op.vjp) == set(op.differentiable), op.name
        for name, rule in op.vjp.items():
            assert rule.strip(), (op.name, name)


def test_rules_use_the_field_notation():
    assert R.OPS["matmul"].vjp == {"a": "unbroadcast(g @ bᵀ)", "b": "unbroadcast(aᵀ @ g)"}
    assert "out" in R.OPS["softmax"].vjp["a"] and "g" in R.OPS["softmax"].vjp["a"]
    assert R.OPS["relu"].vjp["a"] == "where(out ≤ 0, 0, g)"  # PyTorch's threshold_backward


def test_the_ops_route_serves_the_rules():
    body = TestClient(create_app()).get("/api/v1/ops").json()
    by = {op["name"]: op for op in body["ops"]}
    assert by["mul"]["vjp"] == {"a": "unbroadcast(g ⊙ b)", "b": "unbroadcast(g ⊙ a)"}
    assert by["softmax_np"]["vjp"] == {}          # an ndarray op has no backward (L0.2)
    assert set(by) >= {"relu", "tanh", "sqrt", "gelu", "gelu_tanh"}
