"""How each kind of exercise is graded: a small registry, kind name → grading function,
so that a new kind registers itself (`register`) without editing the grader.

A grading function takes a `Job` and returns the `TestResult` list of the submission.
``function`` runs the student's VJP in a child process (`runner`), on their own case and
on each edge case; ``value`` and ``grads`` read a JSON of claimed arrays and run nothing.
In both, the expected answers are computed only after the student's code has exited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glassllm.course import cases
from glassllm.course.cases import Case, build_case
from glassllm.course.exercise import Exercise
from glassllm.course.grader import runner
from glassllm.course.grader.heatmap import heatmap
from glassllm.course.grader.results import TestResult, verdict_table
from glassllm.course.grader.submitted import (
    SubmissionError,
    as_array,
    claimed_arrays,
    code_chunks,
)
from glassllm.course.verdict import Verdict, grade
from glassllm.course.zoo.mystery import Mystery

__all__ = ["KINDS", "Job", "register"]


@dataclass(frozen=True)
class Job:
    """One submission to grade: the exercise (or mystery), the file, whose numbers, how
    long."""

    exercise: Exercise | Mystery
    submission: Path
    student: str
    salt: str
    budget: float                  # seconds for the student's code, in all
    feedback: str
    reveal: bool                   # the exercise shows its expected numbers


Grader = Callable[[Job], list[TestResult]]
KINDS: dict[str, Grader] = {}


def register(kind: str, grader: Grader) -> Grader:
    """Grade exercises whose ``answer.kind`` is `kind` with `grader`; returns it."""
    KINDS[kind] = grader
    return grader


def _verdict(case: Case, expected: np.ndarray, claimed: np.ndarray) -> Verdict:
    ex = case.exercise
    return grade(expected, claimed, ex.digits, ex.atol, ex.rtol,
                 {"masks": case.masks, "factors": case.factors})


def _words(name: str, v: Verdict) -> str:
    if v.passed:
        return f"{name}: right ({v.rule.says()})"
    return f"{name}: wrong: {v.pattern.says if v.pattern is not None else 'not right'}"


def _test(name: str, case: Case, job: Job, claims: dict[str, np.ndarray],
          per_answer: float) -> TestResult:
    """A test of several answers (a case's returns), each worth `per_answer` points."""
    test = TestResult(name, per_answer * len(claims))
    words, tables, right, wrong_masks = [], [], 0, []
    for key, claimed in claims.items():
        v = _verdict(case, case.expected[key], claimed)
        label = key.rpartition("/")[2]
        right += v.passed
        words.append(_words(label, v))
        tables.append(verdict_table(label, v, job.feedback, job.reveal))
        test.verdicts[label] = v.public(job.feedback, job.reveal)
        if v.agree is not None and not v.passed:
            wrong_masks.append(~v.agree)
    test.score = per_answer * right
    test.message = "\n".join(words)
    test.table = "\n".join(tables)
    if wrong_masks and job.feedback != "pass/fail":
        test.heatmap = heatmap(wrong_masks)
    return test


def _failed(name: str, max_score: float, why: str, output: str = "") -> TestResult:
    return TestResult(name, max_score, 0.0, why, output=output)


def case_inputs(exercise: Exercise, student: str, salt: str) -> list[tuple[str, dict]]:
    """Each case's arguments of a function exercise, by name, as `build_case` makes them
    (the same draws), without computing any expected answer: what the child gets."""
    fn = exercise.answer.function
    rng = np.random.Generator(np.random.PCG64(cases.student_seed(salt, exercise, student)))
    values = {v.name: cases._value(v, rng) for v in exercise.variables}
    specs = {v.name: cases._spec(v, values[v.name]) for v in exercise.variables}
    prepared = cases.expr.prepare(exercise.expression, specs, None, limits=cases.LIMITS)
    shape = tuple(prepared.nodes[prepared.out_id].shape)
    spec = exercise.answer.grad_output
    g = np.ones(shape) if spec is None else cases.draw(spec, rng, shape) \
        if spec.generated else spec.value
    own = {p: values[p] for p in fn.params if p != fn.grad_param}
    out = [(cases.GENERATED, {**own, fn.grad_param: g})]
    out += [(fc.name, dict(fc.values)) for fc in fn.cases]
    return [(name, {p: np.asarray(v, dtype=np.float64 if p in fn.grads_of or
                                  p == fn.grad_param else None) for p, v in args.items()})
            for name, args in out]


def grade_function(job: Job) -> list[TestResult]:
    """The student's function on their case and on each edge case, in a child process;
    then (the child gone) the expected answers, and a test per case."""
    ex, fn = job.exercise, job.exercise.answer.function
    per_answer = ex.points / (len(fn.returns) * (1 + len(fn.cases)))
    inputs = case_inputs(ex, job.student, job.salt)
    try:
        if job.submission.suffix == ".json":
            raise SubmissionError(f"{job.submission.name}: this exercise takes a .py file or"
                                  f" a notebook defining {fn.signature}, not claimed arrays")
        code, notebook = code_chunks(job.submission)
    except SubmissionError as exc:
        return [_failed(name, per_answer * len(fn.returns), f"0 points: {exc}")
                for name, _ in inputs]
    runs = runner.run_function(code, notebook, fn.name, list(fn.params), list(fn.returns),
                               [args for _, args in inputs], job.budget)
    case = build_case(ex, job.student, job.salt)           # the child has exited
    tests = []
    for (name, args), part, run in zip(inputs, case.parts, runs, strict=True):
        assert part.name == name and all(np.array_equal(args[p], part.variables[p])
                                         for p in args), "the child's inputs drifted"
        if run.answers is None:
            tests.append(_failed(name, per_answer * len(fn.returns),
                                 f"0 points: {run.error}", run.output))
            continue
        test = _test(name, case, job, {f"{name}/{r}": run.answers[r] for r in fn.returns},
                     per_answer)
        test.output = run.output
        tests.append(test)
    return tests


def grade_arrays(job: Job) -> list[TestResult]:
    """A JSON of claimed arrays (a value or gradient exercise): one test per answer."""
    ex = job.exercise
    case = build_case(ex, job.student, job.salt)
    per_answer = ex.points / max(1, len(case.answers))
    try:
        body = claimed_arrays(job.submission)
    except SubmissionError as exc:
        return [_failed(a.key, per_answer, f"0 points: {exc}") for a in case.answers]
    tests = []
    for spec in case.answers:
        if spec.key not in body:
            tests.append(_failed(spec.key, per_answer, f"0 points: no answer {spec.key!r}"
                                 f" (the answers are: {', '.join(a.key for a in case.answers)})"))
            continue
        try:
            claimed = as_array(spec.key, body[spec.key], 8 * max(1, int(np.prod(spec.shape))))
        except SubmissionError as exc:
            tests.append(_failed(spec.key, per_answer, f"0 points: {exc}"))
            continue
        tests.append(_test(spec.key, case, job, {spec.key: claimed}, per_answer))
    return tests


register("function", grade_function)
register("value", grade_arrays)
register("grads", grade_arrays)
