"""The op registry (SPEC H1) and the wire format (H3), without the service."""

import math

import numpy as np
import pytest

import glassllm.autograd as ag
from glassllm.sandbox import registry as R
from glassllm.sandbox.wire import WireError, coerce, decode_index, encode_array, encode_index

EXAMPLES = [(op, ex) for op in R.OPS.values() for ex in op.examples]


def test_registry_covers_every_autograd_op():
    """H1: every public op of glassllm.autograd is in the registry, and nothing unknown."""
    assert set(ag.__all__) <= set(R.OPS)
    layer_ops = {"rms_norm", "linear", "swiglu", "attention", "transformer_block"}
    reflected = {"rpow"}  # 2 ** t, behind Tensor.__rpow__ (L1.1)
    assert set(R.OPS) - set(ag.__all__) <= layer_ops | reflected


def test_every_op_has_an_example_and_described_inputs():
    for op in R.OPS.values():
        assert op.examples, op.name
        assert op.output in ("tensor", "ndarray")
        d = R.describe(op)
        assert d["name"] == op.name and d["inputs"]
        if op.output == "ndarray":
            assert not op.differentiable, "ndarray ops have no gradients (L0.2)"


@pytest.mark.parametrize("op,example", EXAMPLES, ids=[f"{o.name}:{e.title}" for o, e in EXAMPLES])
def test_example_plan_matches_the_library_and_expected_numbers(op, example):
    args = R.coerce_inputs(op, example.inputs)
    plan = op.plan(args)
    result = R.run(op, args, example.requires_grad)
    assert result.value.shape == plan.shape, "the shape plan predicts the real output (H5)"
    if "value" in example.expected:
        np.testing.assert_allclose(result.value, example.expected["value"], rtol=1e-12)
    for name, grad in example.expected.get("grads", {}).items():
        np.testing.assert_allclose(result.grads[name], grad, rtol=1e-12)


def test_spec_part_l_single_op_examples_are_registered():
    clauses = {(op.name, ex.clause) for op, ex in EXAMPLES if ex.expected}
    for needed in [("embedding", "L3.2"), ("softmax_np", "L4.3"), ("log_softmax", "L4.1"),
                   ("sigmoid", "L4.2"), ("silu", "L4.2"), ("cross_entropy", "L5.1"),
                   ("cross_entropy_grad", "L5.2"), ("rope", "L6.1"), ("repeat_kv", "L6.3")]:
        assert needed in clauses


def test_plans_refuse_before_building():
    """H5: shapes alone decide; the zero-byte probe allocates nothing."""
    big = R.probe((20000, 1))
    p = R.OPS["add"].plan({"a": big, "b": R.probe((1, 20000))})
    with pytest.raises(R.LimitError, match="a, b"):
        R.check_limits(p, max_result_elements=4_000_000, max_matmul_madds=10**9)
    p = R.OPS["matmul"].plan({"a": R.probe((5000, 5000)), "b": R.probe((5000, 5000))})
    assert p.madds == 3 * 5000**3                # forward + the backward's two products
    with pytest.raises(R.LimitError, match="multiply-adds"):
        R.check_limits(p, max_result_elements=10**9, max_matmul_madds=10**9)
    p = R.OPS["repeat_kv"].plan({"x": R.probe((1, 2, 1, 1)), "repeats": 10**9})
    with pytest.raises(R.LimitError, match="repeats"):
        R.check_limits(p, max_result_elements=4_000_000, max_matmul_madds=10**9)


@pytest.mark.parametrize("a,b", [((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)),
                                 ((5, 1, 2, 3), (4, 3, 2)), ((2, 2, 3), (3, 1))])
def test_matmul_shape_agrees_with_numpy(a, b):
    out, madds = R.matmul_shape(a, b)
    assert out == np.matmul(np.ones(a), np.ones(b)).shape
    assert madds > 0


def test_plan_errors_are_numpys():
    with pytest.raises(IndexError, match="out of bounds"):
        R.OPS["embedding"].plan({"weight": np.zeros((4, 2)), "ids": np.array([7])})
    with pytest.raises(ValueError, match="broadcast"):
        R.OPS["add"].plan({"a": np.zeros(3), "b": np.zeros(4)})
    with pytest.raises(np.exceptions.AxisError):
        R.OPS["tsum"].plan({"a": np.zeros(3), "axis": 2, "keepdims": False})


def test_requires_grad_naming_a_constant_is_refused_with_l06():
    op = R.OPS["embedding"]
    args = R.coerce_inputs(op, {"weight": [[0.0]], "ids": [0]})
    with pytest.raises(WireError, match=r"L0\.6"):
        R.run(op, args, ["ids"])


def test_grad_output_shape_must_match():
    op = R.OPS["neg"]
    with pytest.raises(WireError, match=r"\(3,\).*\(2,\)"):
        R.run(op, {"a": np.zeros(2)}, None, np.zeros(3))


@pytest.mark.parametrize("kind,value", [("int_array", [1.5]), ("int_array", [True]),
                                        ("int_array", ["3"]), ("int_array", "NaN"),
                                        ("tensor", [[1.0], [1.0, 2.0]]), ("bool_mask", ["a"]),
                                        ("tensor", [True]), ("tensor", "hello"),
                                        ("int", 2.0), ("bool", 1), ("axis", "0")])
def test_wire_refusals_name_the_input(kind, value):
    with pytest.raises(WireError, match="'x'"):
        coerce(kind, "x", value)


def test_wire_nonfinite_and_round_trip():
    values = [0.1, -0.0, 1e-310, 1.7976931348623157e308, math.pi]
    arr = coerce("tensor", "a", [*values, "NaN", "Infinity", "-Infinity", "nan", "inf", "-inf"])
    assert arr[: len(values)].tolist() == values
    assert encode_array(arr)[len(values):] == ["NaN", "Infinity", "-Infinity"] * 2
    assert encode_array(np.float64(2.5)) == 2.5
    assert coerce("bool_mask", "m", [0, 1]).tolist() == [False, True]


def test_index_round_trip():
    index = (slice(1, None, 2), None, Ellipsis, 0)
    assert decode_index("i", encode_index(index)) == index
    got = decode_index("i", [{"array": [0, 2]}])[0]
    assert got.tolist() == [0, 2]


def test_layer_ops_are_always_registered_and_dead_exports_are_gone():
    """glassllm.layers is part of the package: its ops are registered unconditionally."""
    from glassllm import layers
    from glassllm.sandbox import wire
    from glassllm_service import codec

    for name in ("rms_norm", "linear", "swiglu", "attention", "transformer_block"):
        assert R.OPS[name].fn is getattr(layers, name) and R.OPS[name].module == "glassllm.layers"
    op = R.OPS["linear"]
    args = R.coerce_inputs(op, {"x": [[1.0, 2.0]], "weight": [[1.0, 0.0, 2.0], [3.0, 1.0, 0.0]]})
    result = R.run(op, args, ["x", "weight"])
    np.testing.assert_array_equal(result.value, [[7.0, 2.0, 2.0]])
    np.testing.assert_array_equal(result.grads["weight"], [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(result.grads["x"], [[3.0, 4.0]])
    assert not hasattr(wire, "KINDS") and not hasattr(codec, "loads")
    assert set(R.__all__) <= set(dir(R))
