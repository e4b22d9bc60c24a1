"""Grade a hand-written softmax backward against the gradient sandbox (issue 12).

    python examples/autograde.py --url http://127.0.0.1:8000 \\
        --submission examples/student_softmax.py --results results.json

The submission is a Python file defining ``softmax_backward(x, g)``: the gradient of L with
respect to the logits ``x`` when ``g`` is dL/d softmax(x), both of shape (..., V). For each
test case the grader computes the student's answer locally and sends it to the sandbox's
``POST /api/v1/check`` through `glassllm.client` with ``reveal: false``: the student learns
which elements are wrong, not the expected numbers. (A convenience, not secrecy: the same
sandbox computes any gradient on request.)

The result is written in Gradescope's ``results.json`` format, which otter-grader also
produces: ``{"score", "max_score", "output", "tests": [{"name", "score", "max_score",
"status", "output"}]}``. On Gradescope pass ``--results /autograder/results/results.json``.
Exit status 0 whenever grading ran, whatever the score.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

import numpy as np

from glassllm.client import Sandbox, SandboxError

# (name, points, logits x, upstream gradient g): small, then the hard cases
rng = np.random.default_rng(12)
CASES = [
    ("one row, one-hot upstream", 1.0, np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 0.0, 0.0]])),
    ("a batch of rows", 2.0, rng.standard_normal((4, 5)), rng.standard_normal((4, 5))),
    ("large equal logits (no overflow)", 2.0, np.array([[1000.0, 1000.0, 1000.0]]),
     np.array([[1.0, 2.0, 3.0]])),
    ("3-D input, softmax over the last axis", 2.0, rng.standard_normal((2, 3, 4)),
     rng.standard_normal((2, 3, 4))),
    ("uniform upstream gives zero", 1.0, rng.standard_normal((3, 6)), np.ones((3, 6))),
]


def load(path: Path):
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.softmax_backward


def grade(sandbox: Sandbox, softmax_backward) -> dict:
    tests = []
    for name, points, x, g in CASES:
        test = {"name": name, "max_score": points, "score": 0.0, "status": "failed"}
        try:
            claimed = np.asarray(softmax_backward(x.copy(), g.copy()), dtype=np.float64)
        except Exception:                               # the student's code raised
            test["output"] = "your function raised:\n" + traceback.format_exc(limit=3)
            tests.append(test)
            continue
        report = sandbox.check("softmax", {"a": x}, grad_output=g, grads={"a": claimed},
                               rtol=1e-6, atol=1e-9, reveal=False)["grads"]["a"]
        if report["allclose"]:
            test.update(score=points, status="passed", output="correct")
        elif not report["shape_match"]:
            test["output"] = (f"wrong shape: expected {report['expected_shape']}, got"
                              f" {report['given_shape']}")
        else:
            test["output"] = (f"{report['mismatches']} of {claimed.size} elements are wrong;"
                              f" the first at index {report['first_mismatch']['index']}")
        tests.append(test)
    score = sum(t["score"] for t in tests)
    total = sum(t["max_score"] for t in tests)
    return {"score": score, "max_score": total, "output": f"softmax backward: {score} / {total}",
            "visibility": "visible", "tests": tests}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="the sandbox (default: $GLASSLLM_URL)")
    parser.add_argument("--submission", type=Path,
                        default=Path(__file__).with_name("student_softmax.py"))
    parser.add_argument("--results", type=Path, default=Path("results.json"))
    args = parser.parse_args(argv)
    try:
        fn = load(args.submission)
    except Exception:
        result = {"score": 0.0, "output": "the submission could not be loaded:\n"
                  + traceback.format_exc(limit=3), "tests": []}
    else:
        try:
            with Sandbox(args.url) as sandbox:
                result = grade(sandbox, fn)
        except SandboxError as exc:                    # the grader's fault, not the student's
            print(f"the sandbox refused a grading request: {exc}", file=sys.stderr)
            return 2
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2))
    print(result["output"].splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
