"""`glassllm grade` run by another grader's process (otter's plugin, nbgrader's
preprocessor), never by a cell of the student's kernel (docs/grading.md#otter-grader).

`grade_outside` starts a fresh interpreter, ``python -I -m glassllm.apps.cli grade``
(isolated: no user site-packages, no ``PYTHON*`` variable, not the working folder on its
path, so no file the student left beside the notebook is imported), with an environment
built from nothing but ``PATH``, ``HOME``, ``LANG`` and the course's salt settings, and
reads its JSON report from a private 0700 folder. The student's code runs there in
glassllm's limited child process, as for every other platform.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["GradeError", "grade_outside"]

PASSED_ENV = ("PATH", "HOME", "LANG", "GLASSLLM_COURSE_SALT", "GLASSLLM_COURSE_SALT_FILE",
              "GLASSLLM_GRADE_SECONDS")
MAX_REPORT_BYTES = 64 * 2**20


class GradeError(RuntimeError):
    """`glassllm grade` could not grade: the exercise file, the salt or the student
    (its one line for the instructor), or the command itself failed."""


def grade_outside(exercise: str | Path, submission: str | Path, *, student: str | None,
                  fmt: str, salt_file: str | Path | None = None, practice: bool = False,
                  roster: str | Path | None = None, time_limit: float | None = None,
                  python: str = sys.executable) -> dict[str, Any]:
    """Grade `submission` for `exercise` with ``glassllm grade --format fmt`` in a new
    isolated `python` process; its report (glassllm's JSON: ``score``, ``max_score``,
    ``tests`` of ``name``, ``score``, ``max_score``, ``passed``, ``message``, ``table``,
    ``output``); relative paths are the caller's working folder's. Raises `GradeError`
    with the command's own error line when it exits 2 (not graded), or when it fails
    otherwise."""
    def here(path: str | Path) -> str:            # the command runs in a folder of its own
        return os.path.abspath(path)

    args = [python, "-I", "-m", "glassllm.apps.cli", "grade", here(exercise), here(submission),
            "--format", fmt]
    if student is not None:
        args += ["--student", student]
    if salt_file is not None:
        args += ["--salt-file", here(salt_file)]
    if roster is not None:
        args += ["--roster", here(roster)]
    if practice:
        args.append("--practice")
    if time_limit is not None:
        args += ["--time-limit", repr(float(time_limit))]
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    with tempfile.TemporaryDirectory(prefix="glassllm-report-") as private:
        os.chmod(private, 0o700)
        out = Path(private) / "report.json"
        budget = (time_limit or float(env.get("GLASSLLM_GRADE_SECONDS") or 20)) + 120
        try:
            done = subprocess.run([*args, "--results", str(out)], env=env, cwd=private,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=budget)
        except subprocess.TimeoutExpired:
            raise GradeError(f"glassllm grade did not finish within {budget:g} s") from None
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        if done.returncode != 0:
            why = errors[-1][len("error: "):] if errors else \
                (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise GradeError(why)
        with out.open("rb") as f:
            raw = f.read(MAX_REPORT_BYTES + 1)
    if len(raw) > MAX_REPORT_BYTES:
        raise GradeError(f"glassllm grade's report is larger than {MAX_REPORT_BYTES} bytes")
    return json.loads(raw)
