"""``glassllm grade``: a submission graded offline, with no server and no network, as a
course's grader runs it (docs/grading.md).

`grade_submission` reads an exercise file and a student's submission (a Python file or
a notebook defining the exercise's function, or a JSON of claimed arrays; for a mystery
file, ``kind = "mystery"``, a JSON proof graded by `proofs`), runs the code
in a limited child process (`runner`), and compares each case, element by element, with
glassllm's own answers at the exercise's digits, naming the mistake's pattern;
`write_results` writes the `Report` in a grader's format (`formats`), last and
atomically. The kinds of exercise are a registry (`kinds.register`).
"""

from __future__ import annotations

import os
import tempfile
import time
import tomllib
from pathlib import Path

from glassllm.course.cases import DEFAULT_SALT
from glassllm.course.exercise import MAX_FILE_BYTES, Exercise, load
from glassllm.course.grader import formats, proofs, runner
from glassllm.course.grader.kinds import KINDS, Job, register
from glassllm.course.grader.results import Report, TestResult
from glassllm.course.grader.runner import GraderError
from glassllm.course.zoo import mystery

__all__ = ["DEFAULT_BUDGET", "KINDS", "GraderError", "Job", "Report", "TestResult",
           "grade_submission", "load_exercise", "register", "write_results"]

DEFAULT_BUDGET = 20.0      # seconds of student code: inside PrairieLearn's default 30 s


def grade_submission(exercise: str | Path, submission: str | Path, student: str = "practice",
                     salt: str | None = None, budget: float = DEFAULT_BUDGET,
                     feedback: str | None = None) -> Report:
    """Grade `submission` for `exercise` (a TOML file): `student`'s numbers under `salt`
    (default ``GLASSLLM_COURSE_SALT``, else the practice salt), the student's code given
    `budget` seconds in all. Raises `glassllm.course.ExerciseFileError` for a broken
    exercise file and `GraderError` when the student's code could not be run at all (the
    grader's fault, never a score); whatever the submission is or does, returns a
    complete `Report`."""
    started = time.monotonic()
    ex = load_exercise(exercise)
    if salt is None:
        salt = os.environ.get("GLASSLLM_COURSE_SALT") or DEFAULT_SALT
    if isinstance(ex, mystery.Mystery):
        kind, level, reveal = "mystery", feedback or "pass/fail", False
    else:
        kind, level = ex.answer.kind, feedback or ex.feedback or "digits+pattern"
        reveal = "expected" not in ex.hide
    job = Job(ex, Path(submission), student, salt, budget, level, reveal)
    grader = KINDS.get(kind)
    if grader is None:
        raise ValueError(f"no grader for exercises of kind {kind!r}")
    tests = grader(job)
    off = runner.isolation().off if kind == "function" else ()
    return Report(ex.id, ex.title, student, tests, off, time.monotonic() - started, level)


def load_exercise(path: str | Path) -> Exercise | mystery.Mystery:
    """An exercise file, or a mystery file (top-level ``kind = "mystery"``: read by
    `glassllm.course.zoo.mystery`, raising `MysteryError`, a ValueError naming the file,
    the field and the rule); anything else is read as an exercise."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            kind = tomllib.loads(f.read(MAX_FILE_BYTES + 1).decode("utf-8")).get("kind")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        kind = None                    # the exercise reader names what is wrong
    return mystery.load(path) if kind == "mystery" else load(path)


register("mystery", proofs.grade_proof)


def write_results(text: str, path: str | Path) -> None:
    """Write `text` to `path` atomically: a temporary file beside it, then a rename, so a
    reader sees the old file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def not_graded(why: str, fmt: str) -> str:
    """A complete results file for a grader that could not grade (a broken exercise
    file, a failure of the grader): 0 of 0 points, no test passed (PrairieLearn's
    ``gradable: false``), and why, without a path of this machine."""
    report = Report("unknown", "not graded", "-", [TestResult("not graded", 0.0, 0.0, why)],
                    graded=False)
    return formats.render(report, fmt)
