"""The course side of one sandbox (docs/modes.md): its mode, the exercises it serves, the
student id of a request, and what the open exercises hide from the other routes.

`CourseState` is built once per worker by the app factory (``app.state.course``). In
practice mode nothing is hidden and every check below passes at once; in course mode
`guarded` wraps a computing route's prepare step so that, while an exercise that hides a
part is open, its op is not run (``expected``), not finite-differenced
(``finite_differences``), not opened (``steps``) and its graph's inner gradients not
answered (``graph_grads``). A kind of request says what it touches through its work's
``uses()`` (a `Uses`), so this module knows no kind of request.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glassllm.course import Catalogue, Exercise, Hidden, NoRecord
from glassllm.course.attempts import AttemptStore
from glassllm.course.cases import DEFAULT_SALT, called_ops
from glassllm.course.catalogue import NOTHING_HIDDEN
from glassllm.errors import echo_name
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

log = logging.getLogger("glassllm.course")
STUDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}")
STUDENT_RULE = ("a student id is 1 to 128 letters, digits and . _ @ + -, starting with a"
                " letter or digit")
PRACTICE_STUDENT = "practice"


@dataclass(frozen=True)
class Uses:
    """What a computing request touches: the ops it runs, whether it finite-differences
    them (``check``), opens composites (``expand``), answers its graph's inner gradients
    (``nodes``) and expected numbers (``reveal``: false for a check that hides them)."""

    ops: frozenset[str]
    check: bool = False
    expand: bool = False
    nodes: bool = False
    reveal: bool = True


@dataclass
class Redaction:
    """What an expression's answer leaves out while an exercise hides it."""

    no_expansion: frozenset[str] = frozenset()        # ops not opened
    no_node_grads: bool = False                       # every node's grad is null
    warnings: list[str] = field(default_factory=list)

    def apply(self, result: dict) -> dict:
        """`result` (an eval answer) without the hidden parts, their warnings added."""
        for node in result.get("nodes", ()):
            if node.get("op") in self.no_expansion:
                node.pop("expansion", None)
            if self.no_node_grads:
                node["grad"] = None
        if self.no_node_grads:               # where gradients die is read off the inner ones
            result.pop("dead", None)
        result["warnings"] = [*result.get("warnings", []), *self.warnings]
        return result


@functools.lru_cache(maxsize=8)
def _catalogue(directory: str | None, stamp: tuple, shipped: bool) -> Catalogue:
    return Catalogue.load(directory, shipped=shipped)


def load_catalogue(settings: Settings) -> Catalogue:
    """The exercises `settings` serve (kept per directory state: every app of a test run
    would otherwise read and check the same files again)."""
    folder = settings.exercises_dir
    stamp: tuple = ()
    if folder is not None:
        stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                      for p in sorted(Path(folder).glob("*.toml")))
    return _catalogue(None if folder is None else str(folder), stamp,
                      settings.serves_shipped_exercises)


class CourseState:
    """One worker's course: settings, the exercises, the attempt store."""

    def __init__(self, settings: Settings, catalogue: Catalogue,
                 attempts: AttemptStore | None = None) -> None:
        self.settings, self.catalogue = settings, catalogue
        self.attempts: AttemptStore = attempts or NoRecord()
        self.course = settings.mode == "course"
        self.graded = settings.graded_session
        self.salt = settings.course_salt
        if self.course and self.salt == DEFAULT_SALT:
            log.warning("GLASSLLM_MODE=course with the default GLASSLLM_COURSE_SALT: anyone"
                        " can rebuild any student's numbers with the library; set a secret"
                        " salt (docs/modes.md)")

    @classmethod
    def from_settings(cls, settings: Settings, attempts: AttemptStore | None = None
                      ) -> CourseState:
        return cls(settings, load_catalogue(settings), attempts)

    @staticmethod
    def now() -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def hidden(self, now: dt.datetime | None = None) -> Hidden:
        """What is hidden now: nothing in practice mode."""
        if not self.course:
            return NOTHING_HIDDEN
        return self.catalogue.hidden_at(now or self.now())

    def is_open(self, exercise: Exercise, now: dt.datetime | None = None) -> bool:
        """Practice mode: always; course mode: between opens and closes."""
        return not self.course or exercise.is_open(now or self.now())

    def feedback(self, exercise: Exercise) -> str:
        """The exercise's feedback level, or the mode's default."""
        if exercise.feedback is not None:
            return exercise.feedback
        return "pattern" if self.graded else "digits+pattern"

    def exercise(self, exercise_id: str, instructor: bool = False) -> Exercise:
        """The exercise of that id (404 naming close ones a student may see); in course
        mode 403 before it opens, but to an `instructor` (who may try it first)."""
        found = self.catalogue.get(exercise_id)
        if found is None:
            shown = self.catalogue if instructor else self.catalogue.listed(self.now(),
                                                                           self.course)
            close = difflib.get_close_matches(exercise_id, [ex.id for ex in shown], 3)
            hint = f"; did you mean {', '.join(close)}?" if close else "."
            raise ApiError(404, "unknown_exercise", f"there is no exercise"
                           f" {echo_name(exercise_id, 64)!r}{hint} Every exercise:"
                           " GET /api/v1/exercises", input="id")
        if self.course and not instructor and found.opens is not None \
                and self.now() < found.opens:
            raise ApiError(403, "exercise_not_open", f"exercise {found.id!r} opens at"
                           f" {found.opens.isoformat()}", input="id")
        return found

    def student(self, header: str | None, query: str | None, given: Any = None, *,
                signed: str | None = None) -> str:
        """The student id of a request: the ``X-Student-ID`` header, the ``student`` query
        parameter or the body's ``student`` — all that are given must agree. Practice
        mode's default is ``practice``; course mode needs one (422). With a course token
        (`signed`: its student id) only the token counts: another id given is refused."""
        if signed is not None:
            for where, value in (("X-Student-ID", header), ("student (query)", query),
                                 ("student", given)):
                if value is not None and value != signed:
                    raise ApiError(403, "not_your_record", f"{where} names another student"
                                   " than your token: a student works as themselves only",
                                   input=where.split()[0], access=True)
            return signed
        found = {}
        for where, value in (("X-Student-ID", header), ("student (query)", query),
                             ("student", given)):
            if value is None:
                continue
            if not isinstance(value, str) or not STUDENT.fullmatch(value):
                raise ApiError(422, "invalid_student", f"{where}: {STUDENT_RULE}",
                               input=where.split()[0])
            found[where] = value
        if len(set(found.values())) > 1:
            raise ApiError(422, "invalid_student", "the student id is given twice and"
                           " differs: " + ", ".join(f"{k} {v!r}" for k, v in found.items()),
                           input="student")
        if found:
            return next(iter(found.values()))
        if self.course:
            raise ApiError(422, "student_required", "this course sandbox needs your student"
                           " id: the X-Student-ID header or ?student=ID", input="student")
        return PRACTICE_STUDENT

    # -- what the open exercises hide from the other routes -------------------------------

    def refusal(self, uses: Uses, hidden: Hidden) -> ApiError | None:
        """The 403 of a request that would compute what an open exercise hides."""
        if uses.reveal and (hit := hidden.first("expected", sorted(uses.ops))):
            op, ex = hit
            return ApiError(403, "hidden_by_exercise", f"while exercise {ex!r} is open this"
                            f" sandbox does not compute {op}: the exercise hides its"
                            f" expected numbers. Submit to POST /api/v1/exercises/{ex}/submit;"
                            " /api/v1/check with \"reveal\": false still grades",
                            op=op, input="op", exercise=ex, part="expected")
        if uses.check and (hit := hidden.first("finite_differences", sorted(uses.ops))):
            op, ex = hit
            return ApiError(403, "hidden_by_exercise", f"while exercise {ex!r} is open this"
                            f" sandbox does not finite-difference {op}; send \"check\":"
                            " false", op=op, input="check", exercise=ex,
                            part="finite_differences")
        return None

    def redaction(self, uses: Uses, hidden: Hidden) -> Redaction | None:
        """What an expression's answer leaves out while an exercise hides it."""
        out = Redaction()
        steps = hidden.ops("steps") & uses.ops if uses.expand else frozenset()
        if steps:
            out.no_expansion = steps
            out.warnings.append(f"{', '.join(sorted(steps))} not opened into primitive ops:"
                                f" exercise {hidden.by('steps', min(steps))[0]!r} hides its"
                                " steps while it is open")
        grads = hidden.first("graph_grads", sorted(uses.ops)) if uses.nodes else None
        if grads:
            out.no_node_grads = True
            out.warnings.append(f"the graph's inner gradients are left out: exercise"
                                f" {grads[1]!r} hides them for {grads[0]} while it is open")
        return out if out.warnings else None


def guarded(prepare: Callable[[Any, bool, Settings], Any], course: CourseState
            ) -> Callable[[Any, bool, Settings], Any]:
    """`prepare`, then the open exercises' hiding applied to its work (course mode; in
    practice mode `prepare` itself). The work's ``hide(course, hidden)`` raises a refusal,
    or keeps a redaction for its answer."""
    if not course.course:
        return prepare

    def with_hiding(body: Any, maybe_bools: bool, settings: Settings) -> Any:
        work = prepare(body, maybe_bools, settings)
        hidden = course.hidden()
        if hidden:
            work.hide(course, hidden)
        return work

    return with_hiding


def without_rule(described: dict, rules: dict[str, tuple[str, ...]],
                 expected: dict[str, tuple[str, ...]] | None = None) -> dict:
    """An op's description (``GET /api/v1/ops``) without what open exercises hide of it:
    its backward rule (``vjp`` empty) and its examples' expected numbers (``expected``
    empty), with ``hidden_by`` naming the exercises per part."""
    name = described["name"]
    hidden_by = {}
    if rules.get(name):
        described = {**described, "vjp": {}}
        hidden_by["rule"] = list(rules[name])
    if expected and expected.get(name):
        described = {**described, "examples": [{**e, "expected": {}}
                                               for e in described["examples"]]}
        hidden_by["expected"] = list(expected[name])
    return {**described, "hidden_by": hidden_by} if hidden_by else described


def examples_shown(examples: list[dict], hidden: Hidden) -> list[dict]:
    """The ready examples, each without its expected numbers while an open exercise hides
    those of an op it calls (``hidden_by`` names the exercises)."""
    ops = hidden.ops("expected")
    if not ops:
        return examples
    out = []
    for example in examples:
        hit = sorted(called_ops(example["request"]["expression"]) & ops)
        if hit:
            who = sorted({ex for op in hit for ex in hidden.by("expected", op)})
            example = {**example, "expected": {}, "hidden_by": {"expected": who}}
        out.append(example)
    return out


def lessons_shown(lessons: list[dict], hidden: Hidden) -> list[dict]:
    """The lessons, less those that use an op whose rule an open exercise hides (their
    notes speak of it)."""
    rules = hidden.ops("rule")
    if not rules:
        return lessons
    return [lesson for lesson in lessons
            if not called_ops(lesson["request"]["expression"]) & rules]
