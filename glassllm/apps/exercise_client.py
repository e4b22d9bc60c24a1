"""The client's exercise calls: what the page does, from a notebook (docs/client.md).

    >>> with Sandbox() as sb:                                      # doctest: +SKIP
    ...     ex = sb.exercise("softmax-ce-logits", student="ada")
    ...     ex.variables["logits"]                   # ada's own numbers
    ...     v = sb.submit("softmax-ce-logits", {"logits": my_answer}, student="ada")
    ...     v.passed, v.answers["logits"]["pattern"]
    ...     sb.hint("softmax-ce-logits", student="ada")["text"]

A function exercise is submitted with the function itself: ``sb.submit("rmsnorm-backward",
function=rms_norm_backward)`` runs it here on every case of the exercise (the student's own
numbers and the edge cases) and submits what it returns; the verdicts are the page's.

`ExerciseCalls` and `AsyncExerciseCalls` are mixed into `glassllm.apps.client.Sandbox` and
`AsyncSandbox`: they only build requests and read answers, through the class's ``_send``.
The student id travels as the ``student`` query parameter; default ``$GLASSLLM_STUDENT``,
else none (a practice sandbox then says ``practice``). Every argument is checked before
any request (a submission by function too, before its exercise is read): a TypeError
naming a wrong type, a ValueError for an empty id or an answer that is not numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from glassllm.apps.client_types import case_array, path_segment, require, student_query
from glassllm.apps.client_types import to_wire as wire
from glassllm.sandbox.wire import coerce, encode_array, encode_base64

__all__ = ["AsyncExerciseCalls", "Exercise", "ExerciseCalls", "Submitted"]


def from_wire(value: Any, name: str) -> np.ndarray:
    """An answer's float array (nested lists with the non-finite tokens) as float64."""
    return coerce("tensor", name, value, maybe_bools=False)


def to_wire(value: np.ndarray, base64_min: int) -> Any:
    """A float64 answer exactly: binary from `base64_min` elements, else JSON."""
    return encode_base64(value) if value.size >= base64_min else encode_array(value)


@dataclass
class Exercise:
    """One exercise for one student: ``variables`` (their numbers, NumPy arrays),
    ``grad_output``, ``answers`` (``[{key, shape, case, of}]``: what to give),
    ``function`` (a function exercise's signature and ``cases``), and ``raw`` (the whole
    answer of ``GET /api/v1/exercises/{id}``)."""

    id: str
    title: str
    text: str
    student: str
    variables: dict[str, np.ndarray]
    grad_output: np.ndarray | None
    answers: list[dict]
    function: dict | None
    hints: int
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_answer(cls, answer: dict) -> Exercise:
        case = answer["case"]
        return cls(answer["id"], answer["title"], answer["text"], answer["student"],
                   {k: case_array(v, k) for k, v in case["variables"].items()},
                   None if case.get("grad_output") is None
                   else from_wire(case["grad_output"], "grad_output"),
                   answer["answers"], answer.get("function"), answer["hints"], answer)

    def cases(self) -> list[tuple[str, dict[str, np.ndarray]]]:
        """A function exercise's cases: (name, parameter → array), the student's own
        (``generated``) first."""
        if not self.function:
            return []
        return [(c["name"], {k: case_array(v, k) for k, v in c["inputs"].items()})
                for c in self.function["cases"]]

    def _repr_markdown_(self) -> str:
        return f"### {self.title}\n\n{self.text}"


@dataclass
class Submitted:
    """A graded submission: ``passed``, ``score`` out of ``points``, per answer key its
    verdict (``passed``, ``agree``, ``digits``, ``pattern`` ... as the exercise's feedback
    level allows; masks and digits as NumPy arrays), ``missing`` keys, ``attempt``."""

    passed: bool
    score: float
    points: float
    answers: dict[str, dict]
    missing: list[str]
    attempt: dict
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_answer(cls, answer: dict) -> Submitted:
        verdicts = {}
        for key, v in answer["answers"].items():
            v = dict(v)
            if v.get("agree") is not None:
                v["agree"] = np.array(v["agree"], dtype=bool)
            if v.get("digits") is not None:
                v["digits"] = from_wire(v["digits"], "digits")
            if v.get("expected") is not None:
                v["expected"] = from_wire(v["expected"], "expected")
            verdicts[key] = v
        return cls(answer["passed"], answer["score"], answer["points"], verdicts,
                   list(answer["missing"]), answer["attempt"], answer)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """In a notebook: the score, and per answer which elements agree (and to how many
        digits) and the pattern of a mistake (glassllm.display); Markdown too."""
        from glassllm.apps import display
        return {**display.submitted_bundle(self.passed, self.score, self.points, self.answers,
                                           self.missing), "text/markdown": self._repr_markdown_()}

    def _repr_markdown_(self) -> str:
        lines = [f"**{'passed' if self.passed else 'not yet'}**: {self.score:g} of"
                 f" {self.points:g} points"]
        for key, v in self.answers.items():
            said = (v.get("pattern") or {}).get("says", "")
            lines.append(f"- `{key}`: {'right' if v['passed'] else 'wrong'}"
                         + (f" — {said}" if said else ""))
        lines += [f"- `{key}`: not given" for key in self.missing]
        return "\n".join(lines)


def _path(exercise_id: str, tail: str = "", student: str | None = None) -> str:
    """``/api/v1/exercises/{id}{tail}?student=...``: the id one quoted path segment, never
    empty (the list route); TypeError / ValueError naming ``exercise_id`` or ``student``."""
    return (f"/api/v1/exercises/{path_segment('exercise_id', exercise_id)}{tail}"
            f"{student_query(student)}")


def _answers_of(ex: Exercise, fn: Callable[..., Any]) -> dict[str, Any]:
    """`fn` run on every case of a function exercise: answer key → what it returned."""
    if not ex.function:
        raise ValueError(f"exercise {ex.id!r} asks for {', '.join(a['key'] for a in ex.answers)},"
                         " not a function: pass answers=")
    returns = ex.function["returns"]
    out: dict[str, Any] = {}
    for name, inputs in ex.cases():
        got = fn(*(inputs[p] for p in ex.function["params"]))
        got = (got,) if len(returns) == 1 and not isinstance(got, tuple | list) else got
        if len(got) != len(returns):
            raise ValueError(f"{ex.function['name']} returned {len(got)} arrays on case"
                             f" {name!r}; it returns {len(returns)}: {', '.join(returns)}")
        out.update({f"{name}/{r}": np.asarray(g, dtype=np.float64)
                    for r, g in zip(returns, got, strict=True)})
    return out


def _submit_checks(answers: Any, function: Any, idempotency_key: Any, reveal: Any) -> None:
    """What `submit` checks before any request (before reading a function's exercise)."""
    if (answers is None) == (function is None):
        raise ValueError("submit needs answers= or function=, one of them")
    require(("answers", answers, "mapping"), ("function", function, "function"),
            ("idempotency_key", idempotency_key, "str"), ("reveal", reveal, "bool", False))


def _answer(key: str, value: Any) -> np.ndarray:
    """One answer as float64, or a ValueError / TypeError naming ``answers[key]``."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"answers[{key!r}] must be numbers (an array of floats), got"
                        f" {type(value).__name__}: {str(value)[:80]!r} ({exc})") from None


def _submit_body(answers: Mapping[str, Any], idempotency_key: str | None, reveal: bool,
                 base64_min: int) -> dict:
    body: dict = {"answers": {k: to_wire(_answer(k, v), base64_min)
                              for k, v in answers.items()}}
    if idempotency_key is not None:
        body["idempotency_key"] = idempotency_key
    if reveal:
        body["reveal"] = True
    return body


def _hint_body(number: Any) -> dict:
    require(("number", number, "int"))
    return {} if number is None else {"number": wire(number, name="number")}


class ExerciseCalls:
    """`Sandbox`'s exercise methods (blocking)."""

    def exercises(self) -> list[dict]:
        """Every exercise (``GET /api/v1/exercises``): id, title, points, open, ..."""
        return self._send("GET", "/api/v1/exercises", decode=lambda a: a["exercises"])

    def exercise(self, exercise_id: str, *, student: str | None = None) -> Exercise:
        """One exercise for `student` (``GET /api/v1/exercises/{id}``): their numbers."""
        return self._send("GET", _path(exercise_id, student=student),
                          decode=Exercise.from_answer)

    def submit(self, exercise_id: str, answers: Mapping[str, Any] | None = None, *,
               function: Callable[..., Any] | None = None, student: str | None = None,
               idempotency_key: str | None = None, reveal: bool = False) -> Submitted:
        """Grade `answers` (answer key → array), or `function` run here on every case of
        a function exercise (``POST /api/v1/exercises/{id}/submit``)."""
        _submit_checks(answers, function, idempotency_key, reveal)
        path = _path(exercise_id, "/submit", student)
        if function is not None:
            answers = _answers_of(self.exercise(exercise_id, student=student), function)
        body = _submit_body(answers, idempotency_key, reveal, self.base64_min)
        return self._send("POST", path, body,
                          Submitted.from_answer)

    def hint(self, exercise_id: str, number: int | None = None, *,
             student: str | None = None) -> dict:
        """A hint (``POST /api/v1/exercises/{id}/hints``): ``{number, of, text, ...}``."""
        path, body = _path(exercise_id, "/hints", student), _hint_body(number)
        return self._send("POST", path, body)


class AsyncExerciseCalls:
    """`AsyncSandbox`'s exercise methods (the same, awaited)."""

    async def exercises(self) -> list[dict]:
        return await self._send("GET", "/api/v1/exercises", decode=lambda a: a["exercises"])

    async def exercise(self, exercise_id: str, *, student: str | None = None) -> Exercise:
        return await self._send("GET", _path(exercise_id, student=student),
                                decode=Exercise.from_answer)

    async def submit(self, exercise_id: str, answers: Mapping[str, Any] | None = None, *,
                     function: Callable[..., Any] | None = None, student: str | None = None,
                     idempotency_key: str | None = None, reveal: bool = False) -> Submitted:
        _submit_checks(answers, function, idempotency_key, reveal)
        path = _path(exercise_id, "/submit", student)
        if function is not None:
            answers = _answers_of(await self.exercise(exercise_id, student=student), function)
        body = _submit_body(answers, idempotency_key, reveal, self.base64_min)
        return await self._send("POST", path, body,
                                Submitted.from_answer)

    async def hint(self, exercise_id: str, number: int | None = None, *,
                   student: str | None = None) -> dict:
        path, body = _path(exercise_id, "/hints", student), _hint_body(number)
        return await self._send("POST", path, body)
