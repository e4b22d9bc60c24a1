"""Planned cost against real cost, for every op of the registry (SPEC H5).

The admission (glassllm_service/admission.py) and every limit trust an op's plan
(`glassllm.sandbox.registry.plans`): its elements (output and intermediates) and its multiply-adds,
known from shapes before any work. This module builds, for each op, the inputs a user
could choose to make the op cost the most for its plan — sized so the plan sits near the
limits — runs them through the library's one request path (`prepare_args`, `run`), and
measures the CPU time and the NumPy peak memory (tracemalloc, which NumPy reports its
buffers to) of each.

The plan is turned into seconds with two rates measured on the same machine, side by side:
the CPU time per element of a large ``add`` (forward and backward) and per multiply-add of
a large square ``matmul``. ``time_ratio`` is the measured time over the planned one; an op
whose backward loops in Python over a size the user picks (repeat_kv's repeats before it
summed its copies at once) shows a ratio in the hundreds. ``memory_ratio`` is the peak of
NumPy's allocations over the planned bytes (8 per element of the plan and the inputs).

Used by tests/library/test_plan_cost.py (small limits: fast) and bench/plan_cost.py (the
defaults: the full-size figures). Figures, not timed assertions: the test bounds ratios.
"""

from __future__ import annotations

import dataclasses
import math
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.sandbox import registry
from glassllm.sandbox.limits import Limits

BYTES = 8                         # float64: what a planned element holds


@dataclass(frozen=True)
class Case:
    op: str
    title: str
    args: dict[str, Any]


@dataclass
class Measured:
    case: Case
    elements: int                 # the plan's elements (output and intermediates)
    madds: int                    # the plan's multiply-adds, forward + backward
    inputs: int                   # elements of the array inputs
    seconds: float                # CPU time of prepare_args + run (best of a few)
    peak_bytes: int               # tracemalloc's peak during prepare_args + run
    time_ratio: float = math.nan  # seconds / the planned seconds
    memory_ratio: float = math.nan  # peak_bytes / (8 · (elements + inputs))


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _uniform(shape: tuple[int, ...], low: float = 0.5, high: float = 2.0) -> np.ndarray:
    return _rng().uniform(low, high, size=shape)


def _square(n: int) -> tuple[int, int]:
    side = max(1, math.isqrt(n))
    return side, side


def _last(limit: int, width: int) -> int:
    return max(1, limit // width)


def cases(limits: Limits) -> Iterator[Case]:
    """The costliest inputs per op for its plan, sized near `limits`. Every op of the
    registry has at least one (tests/library/test_plan_cost.py checks it)."""
    arr, res, madds = limits.max_array_elements, limits.max_result_elements, \
        limits.max_matmul_madds
    n = min(arr, res)
    side = math.isqrt(res)
    flat = _uniform((n,))
    outer_a, outer_b = _uniform((side, 1)), _uniform((1, side))
    deep = 16                                           # 2**16 elements in 16 axes of 2
    cube = _uniform((2,) * deep) if 2 ** deep <= n else _uniform((2,) * int(math.log2(n)))
    ones = _uniform((1,) * cube.ndim)

    for name in ("add", "sub", "mul", "div"):
        yield Case(name, "same shape", {"a": flat, "b": flat[::-1].copy()})
        yield Case(name, "outer broadcast (side, 1) by (1, side)", {"a": outer_a, "b": outer_b})
        yield Case(name, "16 broadcast axes of 1", {"a": cube, "b": ones})
    yield Case("where", "same shape", {"condition": flat > 1.0, "a": flat, "b": -flat})
    yield Case("where", "outer broadcast", {"condition": np.array([True, False] * 1)[:1],
                                            "a": outer_a, "b": outer_b})
    yield Case("masked_fill", "same shape", {"a": flat, "mask": flat > 1.0, "value": -np.inf})
    yield Case("masked_fill", "mask broadcast outer", {"a": outer_a, "mask": outer_b > 1.0,
                                                       "value": 0.0})
    yield Case("pow", "array exponent", {"a": flat, "exponent": flat})
    yield Case("pow", "scalar exponent, broadcast", {"a": outer_a, "exponent": outer_b})
    yield Case("rpow", "array base", {"base": flat, "exponent": flat})
    for name in UNARY:
        yield Case(name, "one long axis", {"a": flat})
    # matmul and linear: one big product, many tiny ones (a batched loop in C), a long
    # inner axis (one output element, n multiply-adds)
    k = max(1, round((madds / 3) ** (1 / 3)))
    yield Case("matmul", "square (k, k) @ (k, k)", {"a": _uniform((k, k)), "b": _uniform((k, k))})
    yield Case("matmul", "a batch of 1 x 1 products", {"a": _uniform((n, 1, 1)),
                                                       "b": _uniform((n, 1, 1))})
    yield Case("matmul", "vector · vector", {"a": flat, "b": flat})
    yield Case("matmul", "(1, k) broadcast over a batch", {"a": _uniform((1, 1, 4)),
                                                           "b": _uniform((_last(n, 4), 4, 1))})
    yield Case("linear", "square", {"x": _uniform((k, k)), "weight": _uniform((k, k))})
    yield Case("linear", "rows of width 1", {"x": _uniform((n, 1)), "weight": _uniform((1, 1))})
    # reductions
    for name in ("tsum", "mean", "max"):
        yield Case(name, "all", {"a": flat, "axis": None, "keepdims": False})
        yield Case(name, "columns of a square", {"a": _uniform(_square(n)), "axis": 0,
                                                 "keepdims": True})
        yield Case(name, "16 axes", {"a": cube, "axis": tuple(range(0, cube.ndim, 2)),
                                     "keepdims": False})
    yield Case("max", "every element tied", {"a": np.zeros(n), "axis": None, "keepdims": False})
    yield Case("max", "ties along rows", {"a": np.zeros(_square(n)), "axis": 1,
                                          "keepdims": False})
    # shape and selection
    yield Case("reshape", "to many axes of 1", {"a": flat, "shape": [1] * 30 + [-1]})
    yield Case("transpose", "16 axes reversed", {"a": cube, "axes": None})
    yield Case("transpose", "square", {"a": _uniform(_square(n)), "axes": [1, 0]})
    rows = np.zeros(n, dtype=np.int64)
    yield Case("getitem", "one row taken n times", {"a": _uniform((4,)), "index": rows})
    yield Case("getitem", "outer index pair (side, 1), (1, side)", {
        "a": _uniform((side, side)),
        "index": (np.arange(side).reshape(side, 1) % side, np.zeros((1, side), np.int64))})
    yield Case("getitem", "a mask", {"a": flat, "index": flat > 1.0})
    yield Case("getitem", "a strided slice", {"a": flat, "index": slice(None, None, 3)})
    yield Case("embedding", "one id n times", {"weight": _uniform((4, 1)),
                                               "ids": np.zeros(n, dtype=np.int64)})
    yield Case("embedding", "distinct ids", {"weight": _uniform((n, 1)),
                                             "ids": np.arange(n, dtype=np.int64)})
    yield Case("embedding", "wide rows", {"weight": _uniform((2, _last(n, 2))),
                                          "ids": np.array([0, 1, 0, 1], dtype=np.int64)[:2]})
    for name in ("softmax", "log_softmax"):
        yield Case(name, "one long row", {"a": flat, "axis": -1})
        yield Case(name, "rows of length 1", {"a": _uniform((n, 1)), "axis": -1})
        yield Case(name, "along the first axis", {"a": _uniform(_square(n)), "axis": 0})
    yield Case("softmax_np", "one long row", {"x": flat, "axis": -1})
    yield Case("softmax_np", "rows of length 1", {"x": _uniform((n, 1)), "axis": -1})
    targets = np.zeros(n, dtype=np.int64)
    yield Case("cross_entropy", "N rows of 1 class", {"logits": _uniform((n, 1)),
                                                      "targets": targets})
    yield Case("cross_entropy", "1 row of V classes", {"logits": _uniform((1, n)),
                                                       "targets": targets[:1]})
    yield Case("cross_entropy_grad", "N rows of 1 class", {"logits": _uniform((n, 1)),
                                                           "targets": targets})
    # L6: rope on pairs, repeat_kv with a repeat count the user picks
    pairs = _last(n, 2)
    yield Case("rope", "many positions of one pair", {
        "x": _uniform((1, 1, pairs, 2)), "cos": _uniform((pairs, 1)), "sin": _uniform((pairs, 1))})
    yield Case("rope", "many heads of one position", {
        "x": _uniform((1, pairs, 1, 2)), "cos": _uniform((1, 1)), "sin": _uniform((1, 1))})
    yield Case("repeat_kv", "one element repeated", {"x": _uniform((1, 1, 1, 1)), "repeats": res})
    yield Case("repeat_kv", "many heads, twice", {"x": _uniform((1, _last(min(arr, res // 2), 1),
                                                                  1, 1)), "repeats": 2})
    yield Case("repeat_kv", "a block, 8 times", {"x": _uniform((1, 1, _last(res // 8, 4), 4)),
                                                 "repeats": 8})
    # L7 layers: narrow widths make many rows, many heads make many small products
    yield Case("rms_norm", "rows of width 1", {"x": _uniform((n, 1)), "weight": _uniform((1,)),
                                               "eps": 1e-5})
    yield Case("rms_norm", "one wide row", {"x": _uniform((1, n)), "weight": _uniform((n,)),
                                            "eps": 1e-5})
    yield Case("swiglu", "rows of width 1", {"x": _uniform((_last(n, 4), 1)),
                                             "w1": _uniform((1, 1)), "w2": _uniform((1, 1)),
                                             "w3": _uniform((1, 1))})
    d, f = 16, 48
    yield Case("swiglu", "a block's shape", {"x": _uniform((_last(min(n, res // f), d), d)),
                                             "w1": _uniform((d, f)), "w2": _uniform((f, d)),
                                             "w3": _uniform((d, f))})
    yield from _attention_cases(n, res)


def _tables(n: int, dk: int) -> tuple[np.ndarray, np.ndarray]:
    from glassllm.layers import rope_angles
    return rope_angles(n, dk)


def _attention_case(op: str, title: str, b: int, n: int, h: int, hkv: int, dk: int) -> Case:
    d = h * dk
    cos, sin = _tables(n, dk)
    args: dict[str, Any] = {"x": _uniform((b, n, d)), "wq": _uniform((d, d), -0.3, 0.3),
                            "wk": _uniform((d, hkv * dk), -0.3, 0.3),
                            "wv": _uniform((d, hkv * dk), -0.3, 0.3),
                            "wo": _uniform((d, d), -0.3, 0.3), "n_heads": h, "n_kv_heads": hkv,
                            "cos": cos, "sin": sin}
    if op == "transformer_block":
        f = 2 * d
        args.update({"attn_norm": _uniform((d,)), "ffn_norm": _uniform((d,)),
                     "w1": _uniform((d, f), -0.3, 0.3), "w2": _uniform((f, d), -0.3, 0.3),
                     "w3": _uniform((d, f), -0.3, 0.3), "eps": 1e-5})
    return Case(op, title, args)


def _attention_cases(n: int, res: int) -> Iterator[Case]:
    for op in ("attention", "transformer_block"):
        # many heads of width 2 over a few positions; a long sequence of one head; many
        # sequences of one position (the batch loop is NumPy's)
        heads = max(2, min(64, math.isqrt(max(1, n // 64))))
        yield _attention_case(op, f"{heads} heads of width 2, 8 positions", 1, 8, heads, 1, 2)
        length = max(2, math.isqrt(max(1, res // 4)))
        yield _attention_case(op, f"one head, {length} positions", 1, length, 1, 1, 2)
        yield _attention_case(op, "many sequences of one position", _last(n, 64), 1, 2, 1, 2)


def _arrays(args: dict[str, Any]) -> int:
    total = 0
    for value in args.values():
        if isinstance(value, np.ndarray):
            total += value.size
        elif isinstance(value, tuple):
            total += sum(v.size for v in value if isinstance(v, np.ndarray))
    return total


def _once(case: Case) -> tuple[registry.Prepared, Any]:
    op = registry.OPS[case.op]
    prepared = registry.prepare_args(op, dict(case.args))
    return prepared, registry.run(prepared)


def cpu_seconds(fn: Callable[[], Any], repeats: int = 3) -> float:
    """The least CPU time of `repeats` calls (the process's, BLAS threads included)."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def peak_bytes(fn: Callable[[], Any]) -> int:
    """tracemalloc's peak while `fn` runs, above what was traced when it started."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def measure(case: Case, repeats: int = 3) -> Measured:
    prepared, _ = _once(case)                          # warm, and the plan
    elements, madds = prepared.cost
    seconds = cpu_seconds(lambda: _once(case), repeats)
    peak = peak_bytes(lambda: _once(case))
    return Measured(case, elements, madds, _arrays(case.args), seconds, peak)


@dataclass(frozen=True)
class Rates:
    """CPU seconds per planned element and per planned multiply-add, and a call's fixed
    cost, measured on this machine with the same request path."""

    per_element: float
    per_madd: float
    per_call: float

    def planned_seconds(self, m: Measured) -> float:
        return self.per_call + m.elements * self.per_element + m.madds * self.per_madd


UNARY = ("neg", "exp", "log", "sqrt", "sigmoid", "silu", "relu", "tanh", "gelu", "gelu_tanh")


def rates(limits: Limits, repeats: int = 5) -> Rates:
    """Seconds per planned element: the median over the unary elementwise ops (neg …
    gelu) on one long axis, forward and backward — a typical element of work, so a
    cheap add and an erf-heavy gelu sit within a few times of it. Per multiply-add: a
    square matmul at the limit, less its elements. Per call: a one-element add."""
    n = min(limits.max_array_elements, limits.max_result_elements)
    tiny = measure(Case("add", "one element", {"a": _uniform((1,)), "b": _uniform((1,))}),
                   repeats * 20)
    flat = _uniform((n,))
    per = sorted((m.seconds - tiny.seconds) / m.elements for m in (
        measure(Case(name, "calibration", {"a": flat}), repeats) for name in UNARY))
    per_element = max(per[len(per) // 2], 1e-12)
    k = max(8, round((limits.max_matmul_madds / 3) ** (1 / 3)))
    mm = measure(Case("matmul", "calibration", {"a": _uniform((k, k)), "b": _uniform((k, k))}),
                 repeats)
    work = mm.seconds - tiny.seconds
    per_madd = max(work - mm.elements * per_element, work / 4) / mm.madds
    return Rates(per_element, per_madd, tiny.seconds)


def measure_all(limits: Limits, repeats: int = 3,
                only: Callable[[Case], bool] = lambda case: True) -> tuple[Rates, list[Measured]]:
    """Every case at `limits`, with its ratios to the plan."""
    from threadpoolctl import threadpool_limits

    from glassllm.sandbox.runtime import tune_malloc
    tune_malloc()               # as each worker of the service: freed buffers are reused
    with threadpool_limits(limits=1):                   # the service's default per slot
        r = rates(limits)
        out = []
        for case in cases(limits):
            if not only(case):
                continue
            m = measure(case, repeats)
            m.time_ratio = m.seconds / r.planned_seconds(m)
            m.memory_ratio = m.peak_bytes / (BYTES * (m.elements + m.inputs) + 64 * 1024)
            out.append(m)
    return r, out


def small_limits() -> Limits:
    """Limits small enough that every case runs in milliseconds, large enough that the
    work dominates a call's fixed cost."""
    return dataclasses.replace(Limits(), max_array_elements=2 ** 16,
                               max_result_elements=2 ** 17, max_matmul_madds=3 * 2 ** 21)
