"""One exercise file (TOML, read with the standard library's `tomllib`) → an `Exercise`.

The format's reference is docs/exercises.md; this module is its one reader. `load` reads
and checks a file: every key known, every value of its kind, and then the case built once
for a probe student (`glassllm.course.cases.build_case`), so an expression that does not
parse, a shape that does not fit or an edge case of the wrong shape stops here, at
startup, not in front of a student. Every refusal is an `ExerciseFileError` whose message
is ``"<file>: <field>: <rule>"``.

`load_dir` loads every ``*.toml`` of a directory (sorted by name); `load_all` several
directories with no id twice. ``SHIPPED`` and ``LESSONS_DIR`` are the package's own.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import keyword
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from glassllm.course import cases
from glassllm.course.cases import called_ops
from glassllm.course.exercise_fields import ExerciseFileError, Table
from glassllm.errors import InputError
from glassllm.sandbox import registry
from glassllm.sandbox.expr import ExprError, parse

__all__ = ["HIDE_PARTS", "LESSONS_DIR", "SHIPPED", "Answer", "Exercise", "ExerciseFileError",
           "Factor", "FunctionCase", "FunctionSpec", "Note", "Variable", "load", "load_all",
           "load_dir"]

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "exercises"          # the example exercises
LESSONS_DIR = HERE / "lessons"        # the lessons: exercises shown openly, with notes
ID = r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?"
NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
HIDE_PARTS = ("rule", "steps", "graph_grads", "expected", "finite_differences")
FEEDBACK = ("digits+pattern", "pattern", "pass/fail")
KINDS = ("value", "grads", "function")
DISTRIBUTIONS = {"normal": ("mean", "std"), "uniform": ("low", "high"),
                 "integers": ("low", "high"), "choice": ("values",)}
CLAIM_KINDS = ("approx", "zero", "nonzero", "sum", "dot", "norm", "none", "adds_up")
MAX_ELEMENTS = 100_000                 # of one variable: an exercise is worked by hand
MAX_FILE_BYTES = 1_000_000
MAX_VERSION = 1_000_000
DEFAULT_DIGITS = 4
GENERATED = cases.GENERATED            # the name of a function exercise's own case


@dataclass(frozen=True)
class Variable:
    """One variable of the case: a fixed ``value``, or drawn from a ``distribution``."""

    name: str
    value: Any = None                                  # fixed: a number, bool or nested list
    distribution: str | None = None                    # normal | uniform | integers | choice
    shape: tuple[int, ...] | None = ()                 # None: the output's (grad_output)
    params: tuple[tuple[str, Any], ...] = ()           # mean/std, low/high, values
    decimals: int | None = None                        # generated numbers rounded to these
    requires_grad: bool | None = None

    @property
    def generated(self) -> bool:
        return self.distribution is not None


@dataclass(frozen=True)
class FunctionCase:
    """An extra case a function answer is run on (an edge case): every parameter fixed."""

    name: str
    values: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class FunctionSpec:
    """``name(params) -> returns``: a VJP the student writes. The one parameter that is not
    a case variable is the incoming gradient; ``returns[i]`` is the gradient of
    ``grads_of[i]``."""

    name: str
    params: tuple[str, ...]
    returns: tuple[str, ...]
    grad_param: str
    grads_of: tuple[str, ...]
    reference: str | None = None
    cases: tuple[FunctionCase, ...] = ()

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)}) -> ({', '.join(self.returns)})"


@dataclass(frozen=True)
class Factor:
    """A size a wrong answer may be off by (``N``, the batch size): a number, or the
    length of one axis of a case variable."""

    name: str
    says: str
    value: float | None = None
    variable: str | None = None
    axis: int = 0


@dataclass(frozen=True)
class Answer:
    """What the student gives: the ``value``, the ``grads`` of some variables, or a
    ``function``; ``grad_output`` None means ones (the gradient of the output's sum)."""

    kind: str
    grads: tuple[str, ...] = ()
    grad_output: Variable | None = None
    function: FunctionSpec | None = None
    factors: tuple[Factor, ...] = ()


@dataclass(frozen=True)
class Note:
    """A lesson's sentence and the claims that make it true (tests check them)."""

    text: str
    claims: tuple[dict, ...]


@dataclass(frozen=True, eq=False)
class Exercise:
    """One exercise, as its file says (docs/exercises.md), checked."""

    id: str
    title: str
    text: str
    expression: str                          # the case's forward (an op case, written out)
    variables: tuple[Variable, ...]
    answer: Answer
    file: str = ""
    content_hash: str = ""                   # sha256 of the file's bytes, hex
    version: int = 1                         # with the id, the seed of every student's case
    op: str | None = None                    # the case's op, for an op case
    points: float = 1.0
    digits: int | None = DEFAULT_DIGITS
    atol: float | None = None
    rtol: float | None = None
    feedback: str | None = None              # None: digits+pattern (graded session: pattern)
    max_attempts: int | None = None
    opens: dt.datetime | None = None
    closes: dt.datetime | None = None
    hide: frozenset[str] = frozenset()
    hide_ops: frozenset[str] = frozenset()
    hints: tuple[str, ...] = ()
    notes: tuple[Note, ...] = ()

    @property
    def lesson(self) -> bool:
        """A lesson: shown openly, with sentences on what to notice."""
        return bool(self.notes)

    def is_open(self, now: dt.datetime) -> bool:
        """Between `opens` and `closes` (absent: always)."""
        return (self.opens is None or now >= self.opens) and (
            self.closes is None or now < self.closes)

    def variable(self, name: str) -> Variable | None:
        return next((v for v in self.variables if v.name == name), None)


# --------------------------------------------------------------------------------------
# reading the parts
# --------------------------------------------------------------------------------------

def _array(t: Table, key: str, value: Any) -> Any:
    """A fixed value: a number, a boolean or a rectangular array of them."""
    try:
        a = np.asarray(value)
    except ValueError:
        a = None
    if a is None or a.dtype.kind not in "bif":
        raise t.error(key, "must be a number, a boolean or a rectangular array of them")
    if a.size > MAX_ELEMENTS:
        raise t.error(key, f"has {a.size} elements; at most {MAX_ELEMENTS}")
    return value


def _shape(t: Table, key: str = "shape") -> tuple[int, ...]:
    value = t.raw(key, [])
    if not isinstance(value, list) or len(value) > 6 or not all(
            isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_ELEMENTS
            for n in value):
        raise t.error(key, "must be an array of at most 6 positive integers ([] for a"
                      " single number)")
    if int(np.prod(value)) > MAX_ELEMENTS:
        raise t.error(key, f"makes {int(np.prod(value))} elements; at most {MAX_ELEMENTS}")
    return tuple(value)


def _variable(t: Table, name: str, *, shape_required: bool = True) -> Variable:
    """One variable from its table; or the generated grad_output (`shape_required`
    false: its shape defaults to the output's, and it has no requires_grad)."""
    requires_grad = t.take_bool("requires_grad", None) if shape_required else None
    if t.has("value"):
        if t.has("distribution"):
            raise t.error("value", "a variable is fixed (value) or generated"
                          " (distribution), not both")
        value = _array(t, "value", t.raw("value"))
        t.done()
        return Variable(name, value=value, requires_grad=requires_grad)
    if not t.has("distribution"):
        raise t.error(None, "needs a fixed value (value = ...) or a distribution"
                      " (normal, uniform, integers or choice)")
    dist = t.take_choice("distribution", DISTRIBUTIONS)
    shape = _shape(t) if (shape_required or t.has("shape")) else None
    if dist == "normal":
        params = (("mean", t.take_number("mean", 0.0)),
                  ("std", t.take_number("std", 1.0, above=0.0)))
    elif dist == "uniform":
        low, high = t.take_number("low", 0.0), t.take_number("high", 1.0)
        if not low < high:
            raise t.error("high", f"must be greater than low ({low:g})")
        params = (("low", low), ("high", high))
    elif dist == "integers":
        low = t.take_int("low", 0, low=-10**9, high=10**9)
        high = t.take_int("high", low=-10**9, high=10**9)
        if not low < high:
            raise t.error("high", f"must be greater than low ({low}); high is exclusive,"
                          " as NumPy's integers")
        params = (("low", low), ("high", high))
    else:
        values = t.raw("values")
        if not isinstance(values, list) or not values or not (
                all(isinstance(v, bool) for v in values) or all(
                    isinstance(v, int | float) and not isinstance(v, bool) for v in values)):
            raise t.error("values", "must be a non-empty array of numbers, or of booleans")
        params = (("values", tuple(values)),)
    decimals = None
    if dist in ("normal", "uniform"):
        decimals = t.take_int("decimals", None, low=0, high=12)
    t.done()
    return Variable(name, distribution=dist, shape=shape, params=params, decimals=decimals,
                    requires_grad=requires_grad)


def _case(t: Table) -> tuple[str, str | None, tuple[Variable, ...]]:
    """[case]: the expression (an op case written as one), its op, its variables."""
    t.allow("op", "expression", "variables")
    op = t.take_str("op", None, max_len=64)
    expression = t.take_str("expression", None, max_len=2000)
    if (op is None) == (expression is None):
        raise t.error(None, "needs exactly one of op (a registry op's name) and expression")
    vt = t.table("variables")
    names = list(vt.values)
    if not names:
        raise vt.error(None, "needs at least one variable")
    variables = []
    for name in names:
        if not isinstance(name, str) or not re.fullmatch(NAME, name) \
                or keyword.iskeyword(name) or name in ("inf", "nan"):
            raise vt.error(str(name), "a variable's name is a Python identifier of at most"
                           " 64 characters, not a keyword, inf or nan")
        variables.append(_variable(vt.table(name), name))
    vt.done()
    if op is not None:
        spec = registry.get(op)
        if spec is None:
            raise t.error("op", f"{op!r} is not an op of the registry (GET /api/v1/ops)")
        inputs = [i.name for i in spec.inputs]
        for name in names:
            if name not in inputs:
                raise vt.error(name, f"{op} has no input {name!r}; its inputs: "
                               + ", ".join(inputs))
        for i in spec.inputs:
            if i.required and i.name not in names:
                raise vt.error(None, f"{op}'s input {i.name!r} is required")
        expression = f"{op}({', '.join(f'{n}={n}' for n in inputs if n in names)})"
    else:
        try:
            parse(expression)
        except ExprError as exc:
            raise t.error("expression", str(exc)) from None
    t.done()
    return expression, op, tuple(variables)


def _grad_output(t: Table) -> Variable | None:
    value = t.raw("grad_output", "ones")
    if value == "ones":
        return None
    if isinstance(value, dict):
        return _variable(Table(t.file, t.field("grad_output"), value), "grad_output",
                         shape_required=False)
    if isinstance(value, str):
        raise t.error("grad_output", "must be \"ones\", a fixed array or a table that"
                      " generates one ({distribution = ...})")
    return Variable("grad_output", value=_array(t, "grad_output", value))


def _function(t: Table, variables: tuple[Variable, ...]) -> FunctionSpec:
    t.allow("name", "params", "returns", "reference", "cases")
    name = t.take_str("name", pattern=NAME, rule="must be a Python identifier", max_len=64)
    params = t.take_strings("params", max_items=16, pattern=NAME,
                            rule="must be a Python identifier")
    returns = t.take_strings("returns", max_items=16, pattern=NAME,
                             rule="must be a Python identifier")
    reference = t.take_str("reference", None, max_len=2000)
    known = {v.name for v in variables}
    extra = [p for p in params if p not in known]
    if len(extra) != 1:
        raise t.error("params", "every parameter but one is a variable of the case, and"
                      " the one left is the incoming gradient (its numbers: answer."
                      f"grad_output); here {len(extra)} are not: {', '.join(extra) or 'none'}")
    grad_param = extra[0]
    cases_ = []
    for ct in t.tables("cases", max_items=32):
        cname = ct.take_str("name", max_len=80, one_line=True)
        if cname == GENERATED or cname in (c.name for c in cases_) or "/" in cname:
            raise ct.error("name", f"must be unique, without '/', and not {GENERATED!r}"
                           " (the student's own case)")
        values = tuple((p, _array(ct, p, ct.raw(p))) for p in params)
        ct.done()
        cases_.append(FunctionCase(cname, values))
    t.done()
    return FunctionSpec(name, params, returns, grad_param, (), reference, tuple(cases_))


def _factors(t: Table, variables: tuple[Variable, ...]) -> tuple[Factor, ...]:
    out = []
    for ft in t.tables("factors", max_items=8):
        name = ft.take_str("name", max_len=16, one_line=True)
        says = ft.take_str("says", max_len=80, one_line=True)
        value = ft.take_number("value", None, above=0.0)
        variable = ft.take_str("variable", None, max_len=64)
        axis = ft.take_int("axis", 0, low=-6, high=5)
        if (value is None) == (variable is None):
            raise ft.error(None, "needs exactly one of value (a number) and variable (with"
                           " axis: the length of that axis)")
        if variable is not None and variable not in {v.name for v in variables}:
            raise ft.error("variable", f"{variable!r} is not a variable of the case")
        ft.done()
        out.append(Factor(name, says, value, variable, axis))
    return tuple(out)


def _answer(t: Table, variables: tuple[Variable, ...]) -> Answer:
    t.allow("kind", "grads", "grad_output", "function", "factors")
    kind = t.take_choice("kind", KINDS)
    grads: tuple[str, ...] = ()
    if kind == "grads":
        grads = t.take_strings("grads", max_items=16)
        for k, name in enumerate(grads):
            if name not in {v.name for v in variables}:
                raise t.error(f"grads[{k}]", f"{name!r} is not a variable of the case")
    grad_output = _grad_output(t)
    function = None
    if kind == "function":
        function = _function(t.table("function"), variables)
    factors = _factors(t, variables)
    t.done()
    return Answer(kind, grads, grad_output, function, factors)


def _notes(t: Table) -> tuple[Note, ...]:
    notes = []
    for nt in t.tables("notes", max_items=8):
        text = nt.take_str("text", max_len=1000)
        claims = []
        for ct in nt.tables("claims", max_items=8):
            ct.take_str("path", max_len=300)
            ct.take_choice("kind", CLAIM_KINDS)
            for key in ("expect", "at", "where", "axis", "with"):
                ct.raw(key, None)
            ct.done()
            claims.append(dict(ct.values))
        if not claims:
            raise nt.error("claims", "a note needs the claims that make it true")
        nt.done()
        notes.append(Note(text, tuple(claims)))
    return tuple(notes)


def _read(file: str, data: bytes) -> Exercise:
    try:
        values = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ExerciseFileError(file, "-", f"is not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExerciseFileError(file, "-", f"is not valid TOML: {exc}") from None
    t = Table(file, "", values)
    t.allow("id", "version", "title", "text", "points", "digits", "atol", "rtol",
            "feedback", "max_attempts", "opens", "closes", "hide", "hide_ops", "hints",
            "notes", "case", "answer")
    ex_id = t.take_str("id", pattern=ID, max_len=64,
                       rule="must be 1 to 64 of a-z, 0-9 and -, starting and ending with a"
                            " letter or digit")
    version = t.take_int("version", 1, low=1, high=MAX_VERSION)
    title = t.take_str("title", max_len=120, one_line=True)
    text = t.take_str("text", max_len=20_000)
    points = t.take_number("points", 1.0, low=0.0, high=1000.0)
    digits = t.take_int("digits", None, low=1, high=15)
    atol = t.take_number("atol", None, low=0.0)
    rtol = t.take_number("rtol", None, low=0.0)
    if digits is not None and (atol is not None or rtol is not None):
        raise t.error("digits", "give digits, or atol / rtol, not both")
    if digits is None and atol is None and rtol is None:
        digits = DEFAULT_DIGITS
    elif digits is None:
        atol, rtol = (1e-8 if atol is None else atol), (1e-5 if rtol is None else rtol)
    feedback = t.take_choice("feedback", FEEDBACK, None)
    max_attempts = t.take_int("max_attempts", None, low=1, high=1000)
    opens, closes = t.take_datetime("opens"), t.take_datetime("closes")
    if opens is not None and closes is not None and not closes > opens:
        raise t.error("closes", "must be later than opens")
    hide = t.take_strings("hide", (), max_items=len(HIDE_PARTS), choices=HIDE_PARTS)
    hide_ops = t.take_strings("hide_ops", None, max_items=32, max_len=64)
    for k, name in enumerate(hide_ops or ()):
        if name not in registry.OPS:
            raise t.error(f"hide_ops[{k}]", f"{name!r} is not an op of the registry")
    hints = t.take_strings("hints", (), max_items=20, max_len=2000, unique=False)
    notes = _notes(t)
    expression, op, variables = _case(t.table("case"))
    answer = _answer(t.table("answer"), variables)
    t.done()
    if notes and any(v.generated for v in variables):
        raise t.error("notes", "a lesson's notes are checked against fixed numbers: its"
                      " variables are fixed (value = ...), not generated")
    if hide_ops is None:
        hide_ops = (op,) if op is not None else tuple(called_ops(expression))
    exercise = Exercise(
        id=ex_id, version=version, title=title, text=text, expression=expression,
        variables=variables, answer=answer, file=file,
        content_hash=hashlib.sha256(data).hexdigest(), op=op, points=points, digits=digits,
        atol=atol, rtol=rtol, feedback=feedback,
        max_attempts=max_attempts, opens=opens, closes=closes, hide=frozenset(hide),
        hide_ops=frozenset(hide_ops), hints=hints, notes=notes)
    return _checked(exercise)


def _checked(exercise: Exercise) -> Exercise:
    """Build the case once for a probe student: every shape planned and computed. A
    function answer learns here which gradients its returns are."""
    file = exercise.file
    try:
        exercise = cases.complete(exercise)
        cases.build_case(exercise, "check", cases.DEFAULT_SALT)
    except cases.CaseError as exc:
        raise ExerciseFileError(file, exc.field, exc.rule) from None
    except InputError as exc:
        raise ExerciseFileError(file, "case", str(exc)) from None
    return exercise


def load(path: str | Path) -> Exercise:
    """Read and check one exercise file; raises `ExerciseFileError`."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ExerciseFileError(str(path), "-", f"cannot be read: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ExerciseFileError(str(path), "-", f"is larger than {MAX_FILE_BYTES} bytes")
    return _read(str(path), data)


def load_dir(path: str | Path) -> list[Exercise]:
    """Every ``*.toml`` of a directory, sorted by file name; the same id twice is an error."""
    folder = Path(path)
    if not folder.is_dir():
        raise ExerciseFileError(str(folder), "-", "is not a directory")
    return load_all([folder])


def load_all(folders: Iterable[str | Path]) -> list[Exercise]:
    """The exercises of several directories, in order; an id twice names both files."""
    out: list[Exercise] = []
    seen: dict[str, str] = {}
    for folder in folders:
        for file in sorted(Path(folder).glob("*.toml")):
            exercise = load(file)
            if exercise.id in seen:
                raise ExerciseFileError(str(file), "id", f"{exercise.id!r} is also the id of"
                                        f" {seen[exercise.id]}; every exercise's id is its own")
            seen[exercise.id] = str(file)
            out.append(exercise)
    return out
