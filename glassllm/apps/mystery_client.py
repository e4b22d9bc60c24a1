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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from glassllm.apps.client_types import (
    Result,
    case_array,
    path_segment,
    require,
    student_query,
    to_wire,
)
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
    return case_array(spec["value"] if isinstance(spec, dict) and not is_base64(spec)
                      else spec, name)


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
    another route; the student given, else ``$GLASSLLM_STUDENT``, else none. TypeError
    unless the id and the student are strings, ValueError for an empty id (the list
    route, which answers with a redirect), naming ``mystery_id`` or ``student``."""
    return f"/api/v1/mysteries/{path_segment('mystery_id', mystery_id)}{tail}" + \
        student_query(student)


def _eval_parts(client: Any, mystery_id: str, expression: str | None,
                variables: Mapping[str, Any] | None, grad_output: Any,
                check: bool | Mapping[str, Any], student: str | None, encoding: str | None,
                paths: bool, dead: bool) -> tuple[str, dict]:
    """`mystery_eval`'s path and body, every argument checked before any request (before
    the case is read too). Without `expression` the body has no expression yet and its
    ``variables`` are only the replacements (`_with_case` adds the case's)."""
    path = _path(mystery_id, "/eval", student)
    require(("expression", expression, "str"))
    if encoding not in ("json", "base64", None):
        raise ValueError("encoding must be 'json', 'base64' or None (automatic)")
    body = client._eval_request("" if expression is None else expression, variables,
                                grad_output, check, paths, dead, "json")
    return path, (client._encoded(body, encoding) if expression is not None else body)


def _with_case(client: Any, case: Mystery, body: dict, encoding: str | None) -> dict:
    """The body of the case's own expression: its variables as the server gave them, each
    replaced where given. A name the case does not have is refused (ValueError naming it
    and the case's variables): a typo would otherwise run the case unchanged."""
    given = body.get("variables") or {}
    unknown = [k for k in given if k not in case.raw["variables"]]
    if unknown:
        raise ValueError(f"variables[{unknown[0]!r}]: the case of {case.id!r} has no such"
                         f" variable; its variables are {', '.join(case.raw['variables'])}")
    body = {**body, "expression": case.expression,
            "variables": {**case.raw["variables"], **given}}
    return client._encoded(body, encoding)


def _proof_body(node: int | str, variables: Mapping[str, Any] | None, base64_min: int) -> dict:
    if isinstance(node, bool) or not isinstance(node, int | str | np.integer):
        raise TypeError(f"node must be a node id (an integer) or its source text, got"
                        f" {type(node).__name__}: {str(node)[:80]!r}")
    require(("variables", variables, "mapping"))
    body: dict = {"node": to_wire(node, base64_min, "node")}
    if variables is not None:
        body["variables"] = to_wire(dict(variables), base64_min, "variables")
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
        `variables` where given (a name the case does not have is a ValueError naming it
        and the case's variables, before the evaluation is sent). With `expression`
        (``"silu(z).sum()"``, to test one op alone) `variables` are that expression's.
        `check`, `paths`, `dead`, `encoding`: as for `Sandbox.eval`; every argument is
        checked before any request (a TypeError naming a wrong type).

        Raises: `NotFoundError` (``unknown_mystery``); `InvalidInputError` (422: an
        expression or variable the sandbox refuses, ``invalid_student``, or
        ``student_required`` in a course); `ClientError` 403 ``hidden_by_exercise``
        while an open exercise hides what the case computes; `TooLargeError`, `BusyError`
        and the rest as for `Sandbox.eval`."""
        path, body = _eval_parts(self, mystery_id, expression, variables, grad_output, check,
                                 student, encoding, paths, dead)
        if expression is None:
            body = _with_case(self, self.mystery(mystery_id), body, encoding)
        return self._send("POST", path, body,
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
        any request, for a node that is neither an integer nor a string (ValueError for one
        outside int64), or for variables JSON cannot carry (naming ``variables['x']``)."""
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
        path, body = _eval_parts(self, mystery_id, expression, variables, grad_output, check,
                                 student, encoding, paths, dead)
        if expression is None:
            body = _with_case(self, await self.mystery(mystery_id), body, encoding)
        return await self._send("POST", path, body,
                                Result.from_answer)

    async def prove(self, mystery_id: str, node: int | str,
                    variables: Mapping[str, Any] | None = None, *,
                    student: str | None = None) -> MysteryGrade:
        """See `MysteryCalls.prove`."""
        body = _proof_body(node, variables, self.base64_min)
        return await self._send("POST", _path(mystery_id, "/proof", student), body,
                                MysteryGrade.from_answer)
