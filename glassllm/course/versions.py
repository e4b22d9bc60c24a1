"""What a case is made of, field by field: the memory that keeps a student's numbers put.

A student's numbers come from the exercise's ``id`` and ``version`` (`cases.student_seed`),
not from the file's bytes, so fixing a typo in the text or a hint changes nothing. What
*does* feed the numbers or the expected answers — the expression, the variables (their
order, values, shapes, distributions and parameters), the answer's kind, gradients,
``grad_output`` and a function's parameters, returns and edge cases; a mystery's case and
its pool of bugs — is the case's **definition**. `definition` gives it as one digest per
field (``case.variables.logits.shape`` → SHA-256 of its canonical form), and `changed`
names the fields in which two definitions differ.

The class record keeps the definition of every (course, id, version) it has served
(``case_versions``) and refuses, at startup, a file whose case changed under the same
version: the students' numbers would change under attempts already counted. The cure is
a new ``version`` (new numbers for everyone, on purpose) or undoing the change.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Definition", "changed", "definition", "of_exercise", "of_mystery"]


@dataclass(frozen=True)
class Definition:
    """The case of one exercise (``kind`` ``"exercise"``) or mystery (``"mystery"``) at
    one version: field → SHA-256 hex of the field's canonical JSON, in the file's order."""

    kind: str
    id: str
    version: int
    file: str
    fields: dict[str, str]

    @property
    def fingerprint(self) -> str:
        """One digest of every field: equal fingerprints, equal cases."""
        return _digest(sorted(self.fields.items()))


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True,
                      ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _array(value: Any) -> str:
    """A fixed value by its dtype, shape and bytes: NaN and infinities told apart, and
    ``[1, 2]`` (integers) apart from ``[1.0, 2.0]``."""
    a = np.ascontiguousarray(np.asarray(value))
    return f"{a.dtype.str}{list(a.shape)}:{hashlib.sha256(a.tobytes()).hexdigest()}"


def _expression(text: str) -> str:
    """An expression by its syntax tree (read by `ast`, never run): spaces, line breaks
    and redundant parentheses change no number, so they change no definition."""
    try:
        return ast.dump(ast.parse(text.strip(), mode="eval"))
    except SyntaxError:                  # the loader refuses it first; kept as written
        return text


def _variable(out: dict, prefix: str, variable: Any) -> None:
    if not variable.generated:
        out[f"{prefix}.value"] = _array(variable.value)
    else:
        out[f"{prefix}.distribution"] = variable.distribution
        out[f"{prefix}.shape"] = None if variable.shape is None else list(variable.shape)
        for name, value in variable.params:
            # the numbers drawn: 0 and 0.0 draw the same; [1, 2] and [1.0, 2.0] do not
            out[f"{prefix}.{name}"] = _array(value) if name == "values" else \
                int(value) if variable.distribution == "integers" else float(value)
        out[f"{prefix}.decimals"] = variable.decimals
    out[f"{prefix}.requires_grad"] = variable.requires_grad


def of_exercise(exercise: Any) -> Definition:
    """The definition of an `glassllm.course.exercise.Exercise`'s case."""
    raw: dict[str, Any] = {}
    if exercise.op is not None:
        raw["case.op"] = exercise.op
    else:
        raw["case.expression"] = _expression(exercise.expression)
    raw["case.variables"] = [v.name for v in exercise.variables]
    for v in exercise.variables:
        _variable(raw, f"case.variables.{v.name}", v)
    answer = exercise.answer
    raw["answer.kind"] = answer.kind
    if answer.kind == "grads":
        raw["answer.grads"] = list(answer.grads)
    if answer.grad_output is None:
        raw["answer.grad_output"] = "ones"
    else:
        _variable(raw, "answer.grad_output", answer.grad_output)
    fn = answer.function
    if fn is not None:
        raw["answer.function.params"] = list(fn.params)
        raw["answer.function.returns"] = list(fn.returns)
        for k, case in enumerate(fn.cases):
            raw[f"answer.function.cases[{k}]"] = [case.name, [(p, _array(v))
                                                              for p, v in case.values]]
    return Definition("exercise", exercise.id, int(exercise.version), exercise.file,
                      {k: _digest(v) for k, v in raw.items()})


def of_mystery(mystery: Any) -> Definition:
    """The definition of a `glassllm.course.zoo.mystery.Mystery`: its case and its pool
    of bugs in order (a student's bug is the pool's entry at their seed)."""
    raw = {"case.expression": _expression(mystery.expression),
           "case.variables": mystery.variables,
           "bugs": list(mystery.bugs)}
    return Definition("mystery", mystery.id, int(mystery.version), mystery.file,
                      {k: _digest(v) for k, v in raw.items()})


def definition(item: Any) -> Definition:
    """`of_mystery` for a mystery (it has ``bugs``), else `of_exercise`."""
    return of_mystery(item) if hasattr(item, "bugs") else of_exercise(item)


def changed(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """The fields in which two definitions differ: those of `now` that are new or other,
    in `now`'s order, then those `now` no longer has.

    Example:
        >>> changed({"case.op": "a", "answer.kind": "b"}, {"case.op": "a",
        ...          "answer.kind": "c", "answer.grads": "d"})
        ['answer.kind', 'answer.grads']
    """
    out = [k for k, v in now.items() if before.get(k) != v]
    return out + [k for k in before if k not in now]
