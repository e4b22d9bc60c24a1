"""The course side of one sandbox (docs/modes.md): its mode, the exercises it serves, the
student id of a request, and what the open exercises hide from the other routes.

`CourseState` is built once per worker by the app factory (``app.state.course``). In
practice mode nothing is hidden and every check below passes at once; in course mode
`guarded` wraps a computing route's prepare step so that, while an exercise that hides a
part is open, an op it hides is not run on numbers the student chose (``expected``), not
finite-differenced on them (``finite_differences``), not opened (``steps``) and the inner
gradients of a graph that runs it not answered (``graph_grads``). "Runs" follows the
computation: a kind of request says what it touches through its work's ``uses()`` (a
`Uses`), its ops taken from the one place that knows what each op runs
(`glassllm.sandbox.registry.closure`), so this module knows no kind of request. `spread`
carries a hidden rule to every op that runs the hidden op, for the routes that show
rules (`without_rule`, `lessons_shown`, `examples_shown`, the contract, /openapi.json).
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glassllm.course import Catalogue, Exercise, Hidden, NoRecord
from glassllm.course.attempts import AttemptStore
from glassllm.course.cases import DEFAULT_SALT
from glassllm.course.catalogue import NOTHING_HIDDEN
from glassllm.errors import echo_name
from glassllm.sandbox.registry.closure import runners
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

log = logging.getLogger("glassllm.course")
STUDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+\-]{0,127}")
STUDENT_RULE = ("a student id is 1 to 128 letters, digits and . _ @ + -, starting with a"
                " letter or digit")
PRACTICE_STUDENT = "practice"


@dataclass(frozen=True)
class Uses:
    """What a computing request touches, for the open exercises' hiding.

    ``ops``: every registry op it runs → the op of the request that brings it in, from the
    one place that says so (`glassllm.sandbox.registry.closure`, and for an expression
    `glassllm.sandbox.expr.computation.runs`: ``linear(x, W)`` runs ``matmul``);
    ``check``: it finite-differences them; ``expand``: it opens composites; ``nodes``: its
    answer holds its graph's nodes (inner gradients, paths, the dead report);
    ``chosen``: it runs them on numbers the student chose — a lesson's or a mystery's own
    case is not (its numbers are in the repository), nor a model the sandbox initialised
    from a seed. A function instead of a bool is asked only when something would be
    hidden (comparing a request with the public cases is a digest of it)."""

    ops: Mapping[str, str]
    check: bool = False
    expand: bool = False
    nodes: bool = False
    chosen: bool | Callable[[], bool] = True

    def student_chose(self) -> bool:
        return self.chosen() if callable(self.chosen) else self.chosen


@dataclass
class Redaction:
    """What an expression's answer leaves out while an exercise hides it: the expansion
    of each op whose steps are hidden, and every inner gradient (nodes, paths, the dead
    report), at every depth of the expansions."""

    no_expansion: frozenset[str] = frozenset()        # ops not opened
    no_node_grads: bool = False                       # every node's grad is null
    warnings: list[str] = field(default_factory=list)

    def apply(self, result: dict) -> dict:
        """`result` (an eval answer) without the hidden parts, their warnings added."""
        self._strip(result)
        result["warnings"] = [*result.get("warnings", []), *self.warnings]
        return result

    def _strip(self, result: dict) -> None:
        for node in result.get("nodes", ()):
            if node.get("op") in self.no_expansion:
                node.pop("expansion", None)
            if self.no_node_grads:
                node["grad"] = None
            inner = node.get("expansion")
            if inner is not None:
                self._strip(inner)
                if self.no_node_grads:     # the composite's inputs' gradients: inner ones
                    inner["grads"] = {}
        if self.no_node_grads:      # where gradients die and how they split: inner ones
            result.pop("dead", None)
            result.pop("paths", None)
            if (result.get("first_nonfinite") or {}).get("pass") == "backward":
                result["first_nonfinite"] = None


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
        """The exercise of that id (404 naming close ones a student may see). In course
        mode an exercise before it opens is, to anyone but an `instructor` (who may try
        it first), the same 404 as an id no exercise has: its id and time are the
        course's to announce, so a guessed id tells nothing."""
        found = self.catalogue.get(exercise_id)
        unopened = found is not None and self.course and not instructor \
            and found.opens is not None and self.now() < found.opens
        if found is None or unopened:
            shown = self.catalogue if instructor else self.catalogue.listed(self.now(),
                                                                           self.course)
            close = difflib.get_close_matches(exercise_id, [ex.id for ex in shown], 3)
            hint = f"; did you mean {', '.join(close)}?" if close else "."
            raise ApiError(404, "unknown_exercise", f"there is no exercise"
                           f" {echo_name(exercise_id, 64)!r}{hint} Every exercise:"
                           " GET /api/v1/exercises", input="id")
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
        """The 403 of a request that would compute, on numbers the student chose, what an
        open exercise hides: an op whose expected numbers are hidden, or a finite
        difference of one whose finite differences are."""
        names = sorted(uses.ops)
        hit, part = hidden.first("expected", names), "expected"
        if hit is None and uses.check:
            hit, part = hidden.first("finite_differences", names), "finite_differences"
        if hit is None or not uses.student_chose():
            return None
        op, ex = hit
        via = uses.ops[op]
        ran = op if via == op else f"{op} (your request runs it through {via})"
        if part == "expected":
            return ApiError(403, "hidden_by_exercise", f"while exercise {ex!r} is open this"
                            f" sandbox does not compute {ran} on numbers you choose: the"
                            " exercise hides its expected numbers. Work it out and submit"
                            f" your answer to POST /api/v1/exercises/{ex}/submit",
                            op=op, input="op", exercise=ex, part="expected")
        return ApiError(403, "hidden_by_exercise", f"while exercise {ex!r} is open this"
                        f" sandbox does not finite-difference {ran} on numbers you choose;"
                        " send \"check\": false", op=op, input="check", exercise=ex,
                        part="finite_differences")

    def redaction(self, uses: Uses, hidden: Hidden) -> Redaction | None:
        """What an expression's answer leaves out while an exercise hides it: the steps of
        a hidden op (whoever's numbers: they are the op's text), and the inner gradients
        of a graph that runs one, on numbers the student chose."""
        out = Redaction()
        steps = hidden.ops("steps") & uses.ops.keys() if uses.expand else frozenset()
        if steps:
            out.no_expansion = frozenset(steps)
            out.warnings.append(f"{', '.join(sorted(steps))} not opened into primitive ops:"
                                f" exercise {hidden.by('steps', min(steps))[0]!r} hides its"
                                " steps while it is open")
        grads = hidden.first("graph_grads", sorted(uses.ops)) if uses.nodes else None
        if grads and uses.student_chose():
            out.no_node_grads = True
            out.warnings.append(f"the graph's inner gradients are left out: exercise"
                                f" {grads[1]!r} hides them for {grads[0]} while it is open")
        return out if out.warnings else None

    def hide(self, work: Any) -> Any:
        """`work` (a prepared request with ``hide(course, hidden)``) with the open
        exercises' hiding applied: refused, or its answer's redaction kept. Practice mode,
        or nothing hidden now: `work` as it is."""
        if self.course:
            hidden = self.hidden()
            if hidden:
                work.hide(self, hidden)
        return work


def guarded(prepare: Callable[[Any, bool, Settings], Any], course: CourseState
            ) -> Callable[[Any, bool, Settings], Any]:
    """`prepare`, then the open exercises' hiding applied to its work (course mode; in
    practice mode `prepare` itself). The work's ``hide(course, hidden)`` raises a refusal,
    or keeps a redaction for its answer."""
    if not course.course:
        return prepare

    def with_hiding(body: Any, maybe_bools: bool, settings: Settings) -> Any:
        return course.hide(prepare(body, maybe_bools, settings))

    return with_hiding


@functools.lru_cache(maxsize=32)
def _spread(key: tuple, part: str) -> dict[str, tuple[str, ...]]:
    parts = dict(key)
    out: dict[str, set[str]] = {}
    for op, who in parts.get(part, ()):
        for runner in runners(op):
            out.setdefault(runner, set()).update(who)
    return {op: tuple(sorted(who)) for op, who in sorted(out.items())}


def spread(hidden: Hidden, part: str) -> dict[str, tuple[str, ...]]:
    """Op → the open exercises hiding `part` of an op it runs (its closure): hiding
    matmul's rule hides linear's, which is matmul's rule transposed. Empty when nothing
    of `part` is hidden."""
    return _spread(hidden.key, part) if hidden.parts.get(part) else {}


WITHHELD = "not shown while exercise {who} is open (docs/modes.md)"


def without_rule(described: dict, rules: dict[str, tuple[str, ...]],
                 expected: dict[str, tuple[str, ...]] | None = None) -> dict:
    """An op's description (``GET /api/v1/ops``) without what open exercises hide of it
    (`rules`, `expected`: op → exercise ids, as `spread` gives them). A hidden rule takes
    with it every sentence that speaks of the gradient: ``vjp`` empty, ``sum_invariant``
    null, the summary and the examples' titles replaced by a line naming the exercises
    (``cross_entropy_grad``'s summary is cross_entropy's rule, "a tie splits the
    gradient" is max's). Hidden expected numbers empty the examples' ``expected``.
    ``hidden_by`` names the exercises per part."""
    name = described["name"]
    hidden_by = {}
    if rules.get(name):
        who = ", ".join(rules[name])
        described = {**described, "vjp": {}, "sum_invariant": None,
                     "summary": f"{name}: its description is " + WITHHELD.format(who=who),
                     "examples": [{**e, "title": f"example {k + 1} of {name}"}
                                  for k, e in enumerate(described["examples"])]}
        hidden_by["rule"] = list(rules[name])
    if expected and expected.get(name):
        described = {**described, "examples": [{**e, "expected": {}}
                                               for e in described["examples"]]}
        hidden_by["expected"] = list(expected[name])
    return {**described, "hidden_by": hidden_by} if hidden_by else described


def examples_shown(examples: list[dict], runs: list[frozenset[str]], hidden: Hidden
                   ) -> list[dict]:
    """The ready examples (`runs`: the ops each runs), each without its expected numbers
    while an open exercise hides those of an op it runs, and without its title while one
    hides the rule of an op it runs (``hidden_by`` names the exercises)."""
    expected, rules = hidden.ops("expected"), hidden.ops("rule")
    if not expected and not rules:
        return examples
    out = []
    for k, (example, ops) in enumerate(zip(examples, runs, strict=True)):
        by = {}
        if hit := sorted(ops & expected):
            example = {**example, "expected": {}}
            by["expected"] = sorted({ex for op in hit for ex in hidden.by("expected", op)})
        if hit := sorted(ops & rules):
            by["rule"] = sorted({ex for op in hit for ex in hidden.by("rule", op)})
            example = {**example, "title": f"example {k + 1}"}
        out.append({**example, "hidden_by": by} if by else example)
    return out


def lessons_shown(lessons: list[dict], runs: dict[str, frozenset[str]], hidden: Hidden
                  ) -> list[dict]:
    """The lessons, every one listed and runnable as shipped (their numbers are in the
    repository); a lesson that runs an op whose rule an open exercise hides keeps its
    request and loses its notes, which speak of that rule, for one line saying why
    (``hidden_by`` names the exercises). `runs`: lesson id → the ops it runs."""
    rules = hidden.ops("rule")
    if not rules:
        return lessons
    out = []
    for lesson in lessons:
        hit = sorted(runs[lesson["id"]] & rules)
        if hit:
            who = sorted({ex for op in hit for ex in hidden.by("rule", op)})
            note = (f"What to notice here speaks of the backward rule of {', '.join(hit)},"
                    f" {WITHHELD.format(who=', '.join(who))}.")
            lesson = {**lesson, "notes": [{"text": note, "claims": []}],
                      "hidden_by": {"rule": who}}
        out.append(lesson)
    return out
