"""The ``mystery`` kind: a mystery file (docs/mystery.md) and a student's proof, a JSON
``{"node": id or source text, "variables": {...}}``, graded by the pure function
`glassllm.course.zoo.mystery.grade` as the service grades it. Nothing of the student's
runs: the proof is data. Two tests, half the mystery's points each: ``node`` (its op's
backward is the student's bug) and ``input`` (the Taylor test of the case at those
numbers fails under the bug and passes under the real rules). No output names the bug.
"""

from __future__ import annotations

import json
from typing import Any

from glassllm.course.grader.kinds import Job
from glassllm.course.grader.results import TestResult
from glassllm.course.grader.submitted import SubmissionError, read_bytes
from glassllm.course.zoo import mystery as zoo_mystery

__all__ = ["grade_proof", "read_proof"]

KEYS = ("node", "variables")
SHAPE = '{"node": a node id or its source text, "variables": {name: value, ...}}'


def read_proof(job: Job) -> dict[str, Any]:
    """The proof of a submission file: JSON with ``node`` and, optionally, ``variables``;
    `SubmissionError` naming the field otherwise."""
    path = job.submission
    if path.suffix != ".json":
        raise SubmissionError(f"{path.name}: a mystery takes a .json proof {SHAPE}, not"
                              " code or a notebook")
    try:
        body = json.loads(read_bytes(path))
    except ValueError as exc:
        raise SubmissionError(f"{path.name} is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise SubmissionError(f"{path.name}: the proof must be an object {SHAPE}")
    extra = sorted(set(body) - set(KEYS))
    if extra:
        raise SubmissionError(f"{extra[0]}: not a field of a proof (its fields are node and"
                              " variables)")
    if "node" not in body:
        raise SubmissionError("node: missing: the proof names a node of the case (its id or"
                              " its source text)")
    return body


def _field(message: str) -> str:
    head = message.split(":", 1)[0]
    return message if head in KEYS else f"variables: {message}"


def grade_proof(job: Job) -> list[TestResult]:
    """A mystery proof graded: a ``node`` test and an ``input`` test, each worth half."""
    mystery = job.exercise
    half = mystery.points / 2
    node, given = TestResult("node", half), TestResult("input", half)
    try:
        proof = read_proof(job)
        found = zoo_mystery.grade(mystery, job.student, proof["node"],
                                  proof.get("variables"), job.salt)
    except ValueError as exc:          # SubmissionError, the proof's fields, ExprError
        why = f"0 points: {exc}" if isinstance(exc, SubmissionError) \
            else f"0 points: {_field(str(exc))}"
        node.message = given.message = why
        return [node, given]
    said = found.message.split("; ")
    node.score, node.message = half * found.node_right, said[0]
    given.score, given.message = half * found.input_exposes, said[1]
    node.verdicts = {"node": {"passed": found.node_right}}
    given.verdicts = {"input": {"passed": found.input_exposes, "orders": found.orders}}
    return [node, given]

