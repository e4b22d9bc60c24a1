"""Grade a hand-written softmax backward against the gradient sandbox.

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
It is always written, complete (every test with its ``max_score``): a submission that does
not load (a syntax error, no ``softmax_backward``) scores 0 on every test with the reason;
a traceback shows only the frames of the student's file, by its name (no grader path).
Exit status 0 whenever grading ran, whatever the score; 2 when the sandbox failed (down,
timed out, a proxy's error page): the results then say that the submission was not graded,
at 0 points, and stderr says what failed and where.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

import numpy as np

from glassllm.client import ClientError, Sandbox, SandboxError

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


TOTAL = sum(points for _, points, _, _ in CASES)
INFRASTRUCTURE = ("The grading sandbox did not answer, so this submission was not graded:"
                  " not a problem with your code. Your instructor has been told; the"
                  " submission will be graded again.")


def load(path: Path):
    """The submission's ``softmax_backward``; whatever it raises (a syntax error, an
    import error, SystemExit, a missing function) propagates."""
    spec = importlib.util.spec_from_file_location("submission", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path.name} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "softmax_backward", None)
    if not callable(fn):
        raise AttributeError(f"{path.name} defines no function softmax_backward(x, g)")
    return fn


def student_traceback(exc: BaseException, submission: Path) -> str:
    """The exception as the student should read it: only the frames of their own file, each
    named by its file name alone (no grader path, no grader frame)."""
    mine = submission.resolve()
    tb = traceback.TracebackException.from_exception(exc, limit=20)
    tb.stack = traceback.StackSummary.from_list(
        [(Path(f.filename).name, f.lineno, f.name, f.line) for f in tb.stack
         if Path(f.filename).resolve() == mine])
    if isinstance(exc, SyntaxError) and tb.filename:
        tb.filename = Path(tb.filename).name
    text = "".join(tb.format(chain=False))
    return text.replace(str(mine), mine.name).replace(str(submission), submission.name)


def result(tests: list[dict], output: str) -> dict:
    """Gradescope's results.json: always every test, with its max_score, and the total."""
    return {"score": sum(t["score"] for t in tests), "max_score": TOTAL, "output": output,
            "visibility": "visible", "tests": tests}


def ungraded(output: str) -> list[dict]:
    """Every test at 0 points with one explanation (the submission was never run)."""
    return [{"name": name, "max_score": points, "score": 0.0, "status": "failed",
             "output": output} for name, points, _, _ in CASES]


def grade(sandbox: Sandbox, softmax_backward, submission: Path) -> dict:
    tests = []
    for name, points, x, g in CASES:
        test = {"name": name, "max_score": points, "score": 0.0, "status": "failed"}
        tests.append(test)
        try:
            claimed = np.asarray(softmax_backward(x.copy(), g.copy()), dtype=np.float64)
        except (Exception, SystemExit) as exc:          # the student's code raised
            test["output"] = "your function raised:\n" + student_traceback(exc, submission)
            continue
        try:
            report = sandbox.check("softmax", {"a": x}, grad_output=g, grads={"a": claimed},
                                   rtol=1e-6, atol=1e-9, reveal=False)["grads"]["a"]
        except ClientError as exc:                      # the sandbox refused the answer
            test["output"] = f"your answer could not be checked: {exc.message}"
            continue
        if report["allclose"]:
            test.update(score=points, status="passed", output="correct")
        elif not report["shape_match"]:
            test["output"] = (f"wrong shape: expected {report['expected_shape']}, got"
                              f" {report['given_shape']}")
        else:
            test["output"] = (f"{report['mismatches']} of {claimed.size} elements are wrong;"
                              f" the first at index {report['first_mismatch']['index']}")
    score = sum(t["score"] for t in tests)
    return result(tests, f"softmax backward: {score} / {TOTAL}")


def write(path: Path, results: dict) -> None:
    """results.json, whole or not at all: written beside, then renamed over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.write_text(json.dumps(results, indent=2))
    partial.replace(path)


def main(argv: list[str] | None = None) -> int:
    """Grade; exit 0 when grading ran (whatever the score), 2 when the sandbox failed (the
    results then say so, at 0 points). results.json is written in every case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="the sandbox (default: $GLASSLLM_URL)")
    parser.add_argument("--submission", type=Path,
                        default=Path(__file__).with_name("student_softmax.py"))
    parser.add_argument("--results", type=Path, default=Path("results.json"))
    args = parser.parse_args(argv)
    status = 0
    try:
        fn = load(args.submission)
    except (Exception, SystemExit) as exc:
        why = student_traceback(exc, args.submission)
        results = result(ungraded("not run: the submission could not be loaded"),
                         "the submission could not be loaded:\n" + why)
    else:
        try:
            with Sandbox(args.url) as sandbox:
                results = grade(sandbox, fn, args.submission)
        except SandboxError as exc:                    # the grader's fault, not the student's
            print(f"autograde: grading stopped, the sandbox failed: {exc}", file=sys.stderr)
            results = result(ungraded(INFRASTRUCTURE), INFRASTRUCTURE)
            status = 2
    write(args.results, results)
    print(results["output"].splitlines()[0])
    return status


if __name__ == "__main__":
    sys.exit(main())
