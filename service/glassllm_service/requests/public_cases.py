"""The public cases: the lessons' requests and the shipped mysteries' cases, whose numbers
are in the repository (docs/modes.md).

Hiding refuses a request that runs a hidden op on numbers the student chose; a request
that computes exactly a public case runs on numbers the student did not choose, so it is
served as shipped, a lesson's or a mystery's whatever an exercise hides. "Exactly" is
the expression's `fingerprint` (`glassllm.sandbox.expr.computation`): the same graph on
the same bits with the same variables in the same order and the same ``grad_output``; a
changed number, an extra or reordered variable, another ``grad_output`` make it the
student's own. The digest is taken only when something would be hidden.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from glassllm.course.lesson_requests import LESSONS
from glassllm.course.zoo import mystery as zoo_mystery
from glassllm.sandbox import expr
from glassllm.sandbox.expr.computation import fingerprint


@functools.cache
def fingerprints() -> frozenset[bytes]:
    """The fingerprint of every lesson's request and every shipped mystery's case."""
    requests = [lesson["request"] for lesson in LESSONS]
    requests += [{"expression": m.expression, "variables": m.variables}
                 for m in zoo_mystery.load_dir()]
    return frozenset(fingerprint(expr.prepare(r["expression"], r.get("variables"),
                                              r.get("grad_output"))) for r in requests)


def is_public(prepared: expr.PreparedExpression) -> bool:
    """Whether `prepared` computes exactly a lesson's or a shipped mystery's case."""
    return fingerprint(prepared) in fingerprints()


def chosen(prepared: expr.PreparedExpression) -> Callable[[], bool]:
    """`Uses.chosen` of an expression: asked at most once, and only when needed."""
    return functools.cache(lambda: not is_public(prepared))
