"""Shape plans (SPEC H5): every intermediate a request will cost is known from shapes
before any work, and knowing it costs time proportional to the inputs only.

Indexing shapes come from `glassllm.shapes.index_shape`, which agrees with NumPy (shapes
and messages) and never indexes anything.
"""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from glassllm import registry as R
from glassllm import shapes
from glassllm.shapes import index_shape

LIMITS = {"max_result_elements": 4_000_000, "max_matmul_madds": 10**9}   # the defaults
P = R.probe


def plan(op: str, **args):
    return R.OPS[op].plan(args)


def refused(p: R.Plan) -> R.LimitError:
    with pytest.raises(R.LimitError) as err:
        R.check_limits(p, **LIMITS)
    return err.value


# --------------------------------------------------------------------------------------
# indexing: analytic, NumPy's rules, no work proportional to the result
# --------------------------------------------------------------------------------------

def random_index(rng: random.Random, ndim: int):
    def item():
        r = rng.random()
        if r < 0.15:
            return rng.randint(-4, 4)
        if r < 0.3:
            return slice(rng.choice([None, -3, 0, 1, 5]), rng.choice([None, -2, 0, 3, 6]),
                         rng.choice([None, 1, 2, -1]))
        if r < 0.4:
            return None
        if r < 0.47:
            return Ellipsis
        shape = tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 2)))
        values = np.random.default_rng(rng.randint(0, 99))
        if r < 0.75:
            return values.integers(-4, 4, size=shape)
        return values.random(shape) < 0.5
    items = tuple(item() for _ in range(rng.randint(0, ndim + 2)))
    return items[0] if len(items) == 1 and rng.random() < 0.3 else items


def test_index_shape_agrees_with_numpy_shapes_and_messages():
    """L2.2: basic and advanced indexing, masks, None, "...", adjacency, bounds, broadcast."""
    rng = random.Random(0)
    outcomes = set()
    for _ in range(4000):
        shape = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 4)))
        index = random_index(rng, len(shape))
        try:
            want = np.zeros(shape)[index].shape
        except IndexError as exc:
            want = f"IndexError: {exc}"
        try:
            got = index_shape(shape, index)
        except IndexError as exc:
            got = f"IndexError: {exc}"
        assert got == want, (shape, index)
        outcomes.add(want if isinstance(want, str) else "ok")
    assert "ok" in outcomes and any("out of bounds" in o for o in outcomes)
    assert any("did not match" in o for o in outcomes) and any("broadcast" in o for o in outcomes)


def test_getitem_plan_refuses_a_huge_advanced_index_without_indexing(monkeypatch):
    """QA: [[1.0]][rows (60000, 1), cols (1, 60000)] (~360 KB) took 20 s to be refused:
    indexing the zero-byte probe walked 3.6e9 positions."""
    rows, cols = np.zeros((60000, 1), dtype=np.int64), np.zeros((1, 60000), dtype=np.int64)

    def no_probe(shape):
        raise AssertionError("the plan must not probe an advanced index")
    monkeypatch.setattr(R, "probe", no_probe)
    monkeypatch.setattr(shapes, "probe", no_probe)
    tracemalloc.start()
    try:
        p = plan("getitem", a=np.ones((1, 1)), index=(rows, cols))
        err = refused(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert p.shape == (60000, 60000)
    assert err.input == "a, index" and "3600000000 elements" in err.rule
    assert peak < 2_000_000, f"the plan allocated {peak} bytes"       # the index: 960 KB


def test_embedding_plan_is_analytic_too():
    ids = np.zeros(1_000_000, dtype=np.int64)
    tracemalloc.start()
    try:
        p = plan("embedding", weight=P((4, 1000)), ids=ids)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert p.shape == (1_000_000, 1000) and refused(p).input == "weight, ids"
    assert peak < 100_000, f"the plan allocated {peak} bytes"    # min and max of the ids
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 4"):
        plan("embedding", weight=P((4, 2)), ids=np.array([[0, 7]]))
