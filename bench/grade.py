"""`glassllm grade` timed as a course's grader runs it: the whole command, from a fresh
interpreter (the grader's start, the exercise read, the student's child process started
with only NumPy, ten cases run, the expected answers computed, the results written).

    .venv/bin/python bench/grade.py [--rounds 5]

- ``right``: a 10-case function exercise (RMSNorm's backward on the student's own (4, 8)
  case and nine edge cases), a right submission: target ≤ 3 s, interpreter start included;
- ``import only``: ``python -c "import glassllm.course.grader"``, the part of that time
  which is the grader's own start;
- ``loops on every case``: the same exercise, a submission that never returns, with the
  default time budget (20 s): target ≤ 30 s (PrairieLearn's default timeout), and a
  complete results file (ten tests, each 0 with its reason).

Medians of `--rounds` runs (the loop: one run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "glassllm" / "course" / "exercises" / "rmsnorm-backward.toml"
EDGE = """
[[answer.function.cases]]
name = "edge {k}"
x = [[{k}.0, -1.0, 0.5, 2.0], [0.0, 0.0, 0.0, {k}.0]]
weight = [1.0, 2.0, 3.0, 4.0]
g = [[1.0, 1.0, -1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
"""
RIGHT = """
import numpy as np

def rms_norm_backward(x, weight, g):
    d = x.shape[-1]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    dweight = np.sum(g * x * r, axis=tuple(range(x.ndim - 1)))
    gw = g * weight
    return gw * r - x * r**3 * np.sum(gw * x, axis=-1, keepdims=True) / d, dweight
"""
LOOP = "def rms_norm_backward(x, weight, g):\n    while True:\n        pass\n"


def _ten_cases(folder: Path) -> Path:
    text = SHIPPED.read_text()
    head, _, _ = text.partition("[[answer.function.cases]]")
    path = folder / "ten.toml"
    path.write_text(head.replace('id = "rmsnorm-backward"', 'id = "rmsnorm-ten"')
                    + "".join(EDGE.format(k=k) for k in range(1, 10)))
    return path


def _grade(exercise: Path, source: str, folder: Path) -> tuple[float, dict]:
    sub = folder / "submission.py"
    sub.write_text(source)
    out = folder / "results.json"
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade", str(exercise),
                    str(sub), "--format", "prairielearn", "--practice", "--results", str(out)],
                   check=True, capture_output=True)
    return time.perf_counter() - start, json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        exercise = _ten_cases(folder)
        times = []
        for _ in range(args.rounds):
            seconds, results = _grade(exercise, RIGHT, folder)
            assert len(results["tests"]) == 10 and results["score"] == 1.0, results
            times.append(seconds)
        imports = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import glassllm.course.grader"], check=True)
            imports.append(time.perf_counter() - start)
        loop, results = _grade(exercise, LOOP, folder)
        complete = len(results["tests"]) == 10 and results["score"] == 0.0
    right = statistics.median(times)
    print(f"right, 10 cases:        {right:6.2f} s  (target ≤ 3 s; median of {args.rounds})")
    print(f"  the grader's import:  {statistics.median(imports):6.2f} s")
    print(f"loops on every case:    {loop:6.2f} s  (target ≤ 30 s; results complete:"
          f" {complete}, {len(results['tests'])} tests, score {results['score']})")


if __name__ == "__main__":
    main()
