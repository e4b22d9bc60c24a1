"""Every op's planned cost tracks its real CPU time and memory (SPEC H5).

The admission and the limits trust the plan; an op whose real cost outgrows it by a
factor the user controls is a way around every bound. repeat_kv's backward once looped
in Python once per repeat: a 46-byte request planned as ~4·10⁶ elements took 13 s of CPU.
A reduction's plan counted its output only, not the input-sized gradient its backward
spreads (a sum over 16 axes: 100x its plan).

At small limits (tests/plan_cost.py: every case in milliseconds), each op's costliest
inputs for its plan are run through `prepare_args` and `run`; their CPU time is compared
with the plan turned into seconds by rates measured side by side (a large add per element,
a large matmul per multiply-add), and NumPy's peak allocation (tracemalloc) with the
planned bytes. The suite holds what does not move with the machine's load: the plan's
element counts and NumPy's peak memory. The CPU-time ratio is a figure of bench/plan_cost.py
(at the default limits, or ``--small`` for these), where a busy machine cannot turn it red.
"""

from __future__ import annotations

import numpy as np
import pytest
from plan_cost import cases, measure_all, small_limits

from glassllm import Tensor
from glassllm.autograd import repeat_kv
from glassllm.sandbox import registry

# Peak memory at the small limits (2026-12): at most ~4.3x the planned bytes (an index
# sorted alongside its rows). The time ratio's bound is bench/plan_cost.py's.
MEMORY_RATIO = 8.0


@pytest.fixture(scope="module")
def measured():
    return measure_all(small_limits(), repeats=3)


def test_every_op_of_the_registry_has_a_costliest_case():
    assert {case.op for case in cases(small_limits())} == set(registry.OPS)


def test_every_case_is_planned_near_the_limits():
    """The cases sit near the limits, where a bound matters: each builds at least a
    fifth of the result limit or does at least a tenth of the multiply-adds limit."""
    limits = small_limits()
    for case in cases(limits):
        prepared = registry.prepare_args(registry.OPS[case.op], dict(case.args), limits=limits)
        elements, madds = prepared.cost
        assert (elements >= limits.max_result_elements // 5
                or madds >= limits.max_matmul_madds // 10
                or case.title in SMALL_BY_NATURE), (case.op, case.title, prepared.cost)


# cases whose plan is small on purpose: a strided slice and wide embedding rows build one
# row or a third; attention with many heads is bounded by its scores
SMALL_BY_NATURE = {"a strided slice", "32 heads of width 2, 8 positions"}


def test_peak_memory_tracks_the_plan(measured):
    _, results = measured
    over = [f"{m.case.op} ({m.case.title}): {m.memory_ratio:.1f}x"
            for m in results if m.memory_ratio > MEMORY_RATIO]
    assert not over, f"NumPy's peak over {MEMORY_RATIO}x the planned bytes: {over}"


@pytest.mark.parametrize("op,args,spread", [
    ("tsum", {"a": np.ones(1000), "axis": None, "keepdims": False}, 1000),
    ("max", {"a": np.ones((10, 100)), "axis": 1, "keepdims": True}, 1000),
    ("getitem", {"a": np.ones(1000), "index": 3}, 1000),
    ("embedding", {"weight": np.ones((500, 2)), "ids": np.array([1])}, 1000)])
def test_the_plan_counts_the_gradient_a_small_output_spreads(op, args, spread):
    """A reduction, an index or an embedding lookup can answer a few elements from a large
    input; its backward builds the input's size (the gradient, scattered or spread): the
    plan lists it, as matmul's lists its gradients."""
    prepared = registry.prepare_args(registry.OPS[op], args)
    assert prepared.cost == (prepared.plan.size + spread, 0)
    assert prepared.plan.size < spread


@pytest.mark.parametrize("repeats", [1, 2, 3, 4, 5, 9, 64])
def test_repeat_kv_backward_sums_the_copies(repeats):
    """Whatever the count, the gradient is the sum of the copies' gradients, as
    g.reshape(B, Hkv, repeats, n, dk).sum(axis=2) (exactly: the same adds in order)."""
    rng = np.random.default_rng(repeats)
    x = Tensor(rng.normal(size=(2, 3, 4, 2)), requires_grad=True)
    g = rng.normal(size=(2, 3 * repeats, 4, 2))
    repeat_kv(x, repeats).backward(g)
    expected = g.reshape(2, 3, repeats, 4, 2).sum(axis=2)
    np.testing.assert_array_equal(x.grad, expected)
