"""`glassllm grade` timed as a course's grader runs it: the whole command, from a fresh
interpreter (the grader's start, the exercise read, the student's child process started,
ten cases run, the expected answers computed, the results written), this code side by
side with a baseline revision's (default: where this branch left main), interleaved.

    .venv/bin/python bench/grade.py [--rounds 9] [--baseline REV]

- ``right``: a 10-case function exercise (RMSNorm's backward on the student's own (4, 8)
  case and nine edge cases), a right submission: target ≤ 3 s median, interpreter start
  included, every protection on (the grader root: a user of its own, the private
  Python's chroot jail, a network namespace where one may be made; the protections off,
  if any, are printed). The two codes alternate, round after round, so a busy machine
  weighs on both alike; the ratio's 90 % bootstrap interval says how far another run may
  land;
- ``making the private Python``: once per interpreter and NumPy (``glassllm grade
  --prepare`` into an empty cache), never per run: every ``right`` run above finds it
  made;
- ``import only``: ``python -c "import glassllm.course.grader"``, the grader's own start;
- ``loops on every case``: a submission that never returns, with the default time budget
  (20 s): target ≤ 30 s (PrairieLearn's default timeout), and a complete results file
  (ten tests, each 0 with its reason). This code only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
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


BEFORE = "f033cd4"          # main before the grader's private Python and salt rules


def _ten_cases(folder: Path) -> Path:
    text = SHIPPED.read_text()
    head, _, _ = text.partition("[[answer.function.cases]]")
    path = folder / "ten.toml"
    path.write_text(head.replace('id = "rmsnorm-backward"', 'id = "rmsnorm-ten"')
                    + "".join(EDGE.format(k=k) for k in range(1, 10)))
    return path


def _baseline(rev: str, into: Path) -> Path:
    """The baseline's glassllm package, unpacked from git (imported first on its
    PYTHONPATH, the commands run outside this tree: the venv's editable install is
    this tree)."""
    if rev == "merge-base":
        rev = subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
                             check=True, capture_output=True, text=True).stdout.strip()
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "glassllm"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def _grade(exercise: Path, source: str, folder: Path, path: Path | None = None,
           env: dict | None = None) -> tuple[float, dict, str]:
    sub = folder / "submission.py"
    sub.write_text(source)
    out = folder / "results.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, **(env or {})}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    # this tree's grader refuses the practice salt in a platform's format without
    # --practice; the baseline's knows no such flag
    practice = ["--practice"] if path is None else []
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade", str(exercise),
                           str(sub), "--format", "prairielearn", *practice, "--results",
                           str(out)],
                          check=True, capture_output=True, env=env, text=True, cwd=folder)
    return time.perf_counter() - start, json.loads(out.read_text()), done.stderr


def _ratio(base: list[float], new: list[float], resamples: int = 2000
           ) -> tuple[float, float, float]:
    """median(new) / median(base), with its 90 % bootstrap interval."""
    rng = random.Random(1)
    ratios = sorted(statistics.median(rng.choices(new, k=len(new)))
                    / statistics.median(rng.choices(base, k=len(base)))
                    for _ in range(resamples))
    return (statistics.median(new) / statistics.median(base),
            ratios[int(0.05 * resamples)], ratios[int(0.95 * resamples) - 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--baseline", default=BEFORE,
                        help="a git revision (default: the grader before its private"
                             " Python; 'merge-base': where this branch left main)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        exercise = _ten_cases(folder)
        base_path = _baseline(args.baseline, folder / "baseline")
        cache = folder / "cache"
        cache.mkdir(mode=0o755)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade", "--prepare"],
                       check=True, capture_output=True,
                       env={**os.environ, "GLASSLLM_GRADER_CACHE": str(cache)})
        making = time.perf_counter() - start
        env = {"GLASSLLM_GRADER_CACHE": str(cache)}
        times: dict[str, list[float]] = {"baseline": [], "this": []}
        logs = {}
        for k in range(args.rounds):
            order = ["baseline", "this"] if k % 2 == 0 else ["this", "baseline"]
            for which in order:
                seconds, results, log = _grade(
                    exercise, RIGHT, folder, base_path if which == "baseline" else None,
                    env if which == "this" else None)
                assert len(results["tests"]) == 10 and results["score"] == 1.0, results
                times[which].append(seconds)
                logs[which] = log + "\n" + results.get("output", "")  # the baseline's: there
        imports = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import glassllm.course.grader"], check=True)
            imports.append(time.perf_counter() - start)
        loop, results, _ = _grade(exercise, LOOP, folder, env=env)
        complete = len(results["tests"]) == 10 and results["score"] == 0.0
    ratio, low, high = _ratio(times["baseline"], times["this"])
    print(f"right, 10 cases ({args.rounds} rounds, interleaved; medians):")
    for which in ("baseline", "this"):
        values = times[which]
        off = [line for line in logs[which].splitlines() if "protections off" in line]
        print(f"  {which:9} {statistics.median(values):6.2f} s  [min {min(values):.2f},"
              f" max {max(values):.2f}]  (target ≤ 3 s)"
              f"  {'; '.join(off) if off else 'no protection reported off'}")
    print(f"  this / baseline: {ratio:.2f}  (90 % bootstrap interval {low:.2f} to {high:.2f})")
    print(f"making the private Python (once): {making:6.2f} s")
    print(f"the grader's import:    {statistics.median(imports):6.2f} s")
    print(f"loops on every case:    {loop:6.2f} s  (target ≤ 30 s; results complete:"
          f" {complete}, {len(results['tests'])} tests, score {results['score']})")


if __name__ == "__main__":
    main()
