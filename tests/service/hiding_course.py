"""What the hiding tests share: a course whose three hiding exercises are open now, the
student's numbers of each, the check bisection that recovers a gradient from verdicts,
and the rule texts that must not be served while hidden."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from glassllm.sandbox import registry

SALT = "the hiding course's salt"
# three exercises open now, as a course runs them: matmul's backward (every part), RMSNorm's
# (every part), softmax's numbers (the expected numbers and the inner gradients)
EXERCISES = {
    "mm": (["rule", "steps", "graph_grads", "expected", "finite_differences"], ["matmul"],
           "(x @ w).sum()", {"x": [2, 3], "w": [3, 2]}),
    "rms": (["rule", "steps", "graph_grads", "expected", "finite_differences"], None,
            "rms_norm(x, weight)", {"x": [2, 4], "weight": [4]}),
    "sm": (["expected", "graph_grads"], None, "softmax(s)", {"s": [2, 3]}),
}
X = [[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]]
W = [[1.0, 0.5], [0.0, 1.0], [1.0, -1.0]]


def exercise_file(ex_id: str, hide: list[str], hide_ops: list[str] | None, expression: str,
                  shapes: dict[str, list[int]], extra: str = "") -> str:
    ops = "" if hide_ops is None else f"hide_ops = {json.dumps(hide_ops)}\n"
    variables = "".join(f"[case.variables.{name}]\nshape = {shape}\ndistribution = \"normal\"\n"
                        for name, shape in shapes.items())
    return (f'id = "{ex_id}"\ntitle = "The backward of {expression}"\ntext = "Derive it."\n'
            f"hide = {json.dumps(hide)}\n{ops}{extra}[case]\nexpression = \"{expression}\"\n"
            f"{variables}[answer]\nkind = \"grads\"\ngrads = {json.dumps(list(shapes))}\n")


def course_dir(folder: Path, exercises: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for ex_id, (hide, ops, expression, shapes) in (exercises or EXERCISES).items():
        (folder / f"{ex_id}.toml").write_text(exercise_file(ex_id, hide, ops, expression,
                                                            shapes), encoding="utf-8")
    return folder


def bisect(check, case: dict, name: str, shape: tuple[int, ...], steps: int = 50,
           width: float = 64.0) -> tuple[np.ndarray, list]:
    """The oracle attack on ``POST /api/v1/check`` with ``reveal: false``: every element of
    gradient `name` of `case` starts in [-width/2, width/2]; each request claims, per
    element, the middle of the lower half of its interval with ``atol`` a quarter of the
    width (rtol 0), and the verdict per element (``mask``) says which half holds it. After
    `steps` requests each element is known to width·2⁻ˢᵗᵉᵖˢ. `check(body)` posts and returns
    the response; returns the estimate (nan where nothing came back) and the responses."""
    lo = np.full(shape, -width / 2)
    w = width
    answers = []
    for _ in range(steps):
        claim = lo + w / 4
        r = check({**case, "claimed": {"grads": {name: claim.tolist()}}, "reveal": False,
                   "rtol": 0.0, "atol": w / 4})
        answers.append(r)
        if r.status_code != 200:
            continue
        wrong = np.array(r.json()["grads"][name]["mask"])
        lo = np.where(wrong, lo + w / 2, lo)
        w /= 2
    estimate = lo + w / 2 if w < width else np.full(shape, np.nan)
    return estimate, answers


# how the contract words some rules, beside the registry's text of each
PHRASES = {"matmul": ["unbroadcast(g @ bᵀ)", "x: g @ weightᵀ", "g @ w2ᵀ"],
           "rms_norm": ["(d · r³)", "d * r**3", "mean term"],
           "cross_entropy": ["(softmax - one-hot) / N", "one_hot(targets)) / N",
                             "1/N of the mean", "p − one-hot"]}


def rule_texts(op: str) -> list[str]:
    """The backward rule of `op` as the registry (its `vjp`) and the contract write it."""
    return [v for v in registry.OPS[op].vjp.values() if len(v) >= 8] + PHRASES.get(op, [])
