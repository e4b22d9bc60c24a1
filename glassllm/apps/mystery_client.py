"""The client's mystery calls: mystery mode from a notebook (docs/mystery.md).

    >>> from glassllm.client import Sandbox
    >>> with Sandbox() as sb:                                      # doctest: +SKIP
    ...     [m["id"] for m in sb.mysteries()]
    ...     case = sb.mystery("mystery-mlp")
    ...     case.expression, case.variables["x"]         # the case to hunt in
    ...     r = sb.mystery_eval("mystery-mlp", check={"modes": ["taylor"]}, student="ada")
    ...     r.raw["check"]["taylor"]["passed"]           # False: ada's bug is switched on
    ...     r = sb.mystery_eval("mystery-mlp", "silu(z).sum()", {"z": [0.5, -1.0]},
    ...                         check={"modes": ["taylor"]}, student="ada")   # one op alone
    ...     g = sb.prove("mystery-mlp", 5, student="ada")   # the node, the case's numbers
    ...     g.node_right, g.input_exposes, g.score, g.message

Every evaluation sent here runs with the student's wrong backward rule switched on for
that request only; the bug's id never leaves the server, and a proof is graded by it:
half the points for the node (its op is the bug's), half for the input (the Taylor test
of the case fails there under the bug and passes under the real rules).

`MysteryCalls` and `AsyncMysteryCalls` are mixed into `glassllm.apps.client.Sandbox` and
`AsyncSandbox`: they only build requests and read answers, through the class's ``_send``
(and ``_eval_request``, eval's body). The student id travels as the ``student`` query
parameter, as the exercise calls send it; default ``$GLASSLLM_STUDENT``, else none (a
practice sandbox then says ``practice``, a course sandbox refuses with 422
``student_required``). The case itself is the same for every student (only the bug
differs), so ``mystery(id)`` takes no student.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import numpy as np

from glassllm.apps.client_types import Result, from_wire, require, to_wire
from glassllm.sandbox.wire import is_base64

__all__ = ["AsyncMysteryCalls", "Mystery", "MysteryCalls", "MysteryGrade"]


@dataclass
class Mystery:
    """One mystery's case, as every student gets it (never its bug): ``expression`` (the
    case, registry ops), ``variables`` (name → NumPy array: floats as float64, exactly;
    ids and targets as integers, masks as booleans, so they can be sent back as they
    are), ``points`` and ``raw`` (the whole answer of ``GET /api/v1/mysteries/{id}``;
    ``raw["variables"]`` keeps the wire form, with any ``requires_grad: false``)."""

    id: str
    title: str
    text: str
    points: float
    expression: str
    variables: dict[str, np.ndarray]
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_answer(cls, answer: dict) -> Mystery:
        return cls(answer["id"], answer["title"], answer["text"], answer["points"],
                   answer["expression"],
                   {k: _array(v, k) for k, v in answer["variables"].items()}, answer)

    def _repr_markdown_(self) -> str:
        return f"### {self.title}\n\n{self.text}\n\n`{self.expression}`"


def _array(spec: Any, name: str) -> np.ndarray:
    """A case variable (``{"value": ..., "requires_grad": ...}`` or the bare value) as its
    kind: a binary array keeps its dtype; JSON integers stay integers, booleans booleans,
    the rest float64 (non-finite tokens included)."""
    value = spec["value"] if isinstance(spec, dict) and not is_base64(spec) else spec
    leaf = value
    while isinstance(leaf, list) and leaf:
        leaf = leaf[0]
    if isinstance(leaf, bool | int):
        return np.asarray(value)
    return from_wire(value, name)


@dataclass
class MysteryGrade:
    """A proof graded (``POST /api/v1/mysteries/{id}/proof``): ``node_right`` (the node's
    op has the wrong backward), ``input_exposes`` (the Taylor test of the case fails at
    the input under the bug and passes under the real rules), ``score`` of ``points``
    (half each), ``orders`` (``{"bug", "real"}``: the Taylor orders at the input; None
    where linear or unmeasured), ``message`` (the grade in words) and ``raw``."""

    mystery: str
    node_right: bool
    input_exposes: bool
    score: float
    points: float
    orders: dict
    message: str
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_answer(cls, answer: dict) -> MysteryGrade:
        return cls(answer["mystery"], answer["node_right"], answer["input_exposes"],
                   answer["score"], answer["points"], answer["orders"], answer["message"],
                   answer)

    def _repr_markdown_(self) -> str:
        return f"**{self.score:g} of {self.points:g} points**: {self.message}"


def _path(mystery_id: str, tail: str = "", student: str | None = None) -> str:
    """``/api/v1/mysteries/{id}{tail}?student=...``: the id one quoted path segment (``.``
    and ``..`` too, which a URL resolver would otherwise remove), so an id can never reach
    another route; the student given, else ``$GLASSLLM_STUDENT``, else none."""
    require(("mystery_id", mystery_id, "str", False))
    segment = quote(mystery_id, safe="")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    student = student or os.environ.get("GLASSLLM_STUDENT") or None
    query = f"?{urlencode({'student': student})}" if student else ""
    return f"/api/v1/mysteries/{segment}{tail}{query}"


def _case_variables(case: Mystery, variables: Mapping[str, Any] | None) -> dict:
    """The case's variables as the server gave them, each replaced where given."""
    require(("variables", variables, "mapping"))
    return {**case.raw["variables"], **(variables or {})}


def _proof_body(node: int | str, variables: Mapping[str, Any] | None, base64_min: int) -> dict:
    if isinstance(node, bool) or not isinstance(node, int | str | np.integer):
        raise TypeError(f"node must be a node id (an integer) or its source text, got"
                        f" {type(node).__name__}: {str(node)[:80]!r}")
    require(("variables", variables, "mapping"))
    body: dict = {"node": node if isinstance(node, str) else int(node)}
    if variables is not None:
        body["variables"] = to_wire(dict(variables), base64_min)
    return body


class MysteryCalls:
    """`Sandbox`'s mystery methods (blocking)."""

    def mysteries(self) -> list[dict]:
        """Every mystery (``GET /api/v1/mysteries``): ``[{"id", "title", "points"}]``."""
        return self._send("GET", "/api/v1/mysteries", decode=lambda a: a["mysteries"])

    def mystery(self, mystery_id: str) -> Mystery:
        """One mystery's case (``GET /api/v1/mysteries/{id}``), never its bug.

        Raises: `NotFoundError` (404, ``code`` ``unknown_mystery``, the id in its message)
        for an id no mystery has; the client's other `SandboxError`s as every call does."""
        return self._send("GET", _path(mystery_id), decode=Mystery.from_answer)

    def mystery_eval(self, mystery_id: str, expression: str | None = None,
                     variables: Mapping[str, Any] | None = None, grad_output: Any = None,
                     check: bool | Mapping[str, Any] = False, *, student: str | None = None,
                     encoding: str | None = None, paths: bool = False,
                     dead: bool = False) -> Result:
        """`Sandbox.eval` with `student`'s bug switched on for this request
        (``POST /api/v1/mysteries/{id}/eval``): the same body and the same `Result`.

        Without `expression` it evaluates the case: the mystery is read first (``GET
        /api/v1/mysteries/{id}``) and its variables sent as given, each replaced by
        `variables` where given. With `expression` (``"silu(z).sum()"``, to test one op
        alone) `variables` are that expression's. `check`, `paths`, `dead`, `encoding`:
        as for `Sandbox.eval`.

        Raises: `NotFoundError` (``unknown_mystery``); `InvalidInputError` (422: an
        expression or variable the sandbox refuses, ``invalid_student``, or
        ``student_required`` in a course); `ClientError` 403 ``hidden_by_exercise``
        while an open exercise hides what the case computes; `TooLargeError`, `BusyError`
        and the rest as for `Sandbox.eval`."""
        if expression is None:
            case = self.mystery(mystery_id)
            expression, variables = case.expression, _case_variables(case, variables)
        body = self._eval_request(expression, variables, grad_output, check, paths, dead,
                                  encoding)
        return self._send("POST", _path(mystery_id, "/eval", student), body,
                          Result.from_answer)

    def prove(self, mystery_id: str, node: int | str,
              variables: Mapping[str, Any] | None = None, *,
              student: str | None = None) -> MysteryGrade:
        """Grade a proof (``POST /api/v1/mysteries/{id}/proof``, body ``{"node": node,
        "variables": {...}}``): `node` is the node whose backward is wrong (its id in the
        case's graph, as ``mystery_eval(...).raw["nodes"]`` numbers them, or its source
        text), `variables` the numbers that expose it (the case's, each replaced where
        given; arrays travel exactly). Returns a `MysteryGrade`.

        Raises: `InvalidInputError` (422 ``invalid_proof``, ``input`` naming ``node`` or
        ``variables``: a node the case lacks, a variable it does not have; or
        ``invalid_student`` / ``student_required``); `NotFoundError`
        (``unknown_mystery``); `ClientError` 403 ``hidden_by_exercise``; TypeError, before
        any request, for a node that is neither an integer nor a string."""
        body = _proof_body(node, variables, self.base64_min)
        return self._send("POST", _path(mystery_id, "/proof", student), body,
                          MysteryGrade.from_answer)


class AsyncMysteryCalls:
    """`AsyncSandbox`'s mystery methods (the same, awaited)."""

    async def mysteries(self) -> list[dict]:
        """See `MysteryCalls.mysteries`."""
        return await self._send("GET", "/api/v1/mysteries", decode=lambda a: a["mysteries"])

    async def mystery(self, mystery_id: str) -> Mystery:
        """See `MysteryCalls.mystery`."""
        return await self._send("GET", _path(mystery_id), decode=Mystery.from_answer)

    async def mystery_eval(self, mystery_id: str, expression: str | None = None,
                           variables: Mapping[str, Any] | None = None,
                           grad_output: Any = None, check: bool | Mapping[str, Any] = False,
                           *, student: str | None = None, encoding: str | None = None,
                           paths: bool = False, dead: bool = False) -> Result:
        """See `MysteryCalls.mystery_eval`."""
        if expression is None:
            case = await self.mystery(mystery_id)
            expression, variables = case.expression, _case_variables(case, variables)
        body = self._eval_request(expression, variables, grad_output, check, paths, dead,
                                  encoding)
        return await self._send("POST", _path(mystery_id, "/eval", student), body,
                                Result.from_answer)

    async def prove(self, mystery_id: str, node: int | str,
                    variables: Mapping[str, Any] | None = None, *,
                    student: str | None = None) -> MysteryGrade:
        """See `MysteryCalls.prove`."""
        body = _proof_body(node, variables, self.base64_min)
        return await self._send("POST", _path(mystery_id, "/proof", student), body,
                                MysteryGrade.from_answer)
