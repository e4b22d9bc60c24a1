"""A student's case of an exercise: their own numbers, and the answers expected of them.

``seed = HMAC-SHA256(salt, id ‖ 0x00 ‖ version ‖ 0x00 ‖ student_id)``, its first 8 bytes
big-endian (`student_seed`; ``version`` the exercise's integer in decimal); the generated
variables are drawn from ``numpy.random.Generator(PCG64(seed))`` in the file's order, then
a generated ``grad_output``. Nothing is stored: any worker, replica, restart or the
offline grader rebuilds the same case from the exercise file, the salt and the student id
(with the same NumPy version, whose Generator streams are fixed per version). The file's
other bytes (its text, hints, points) are not in the seed: fixing a typo changes no one's
numbers; a change to the case itself is a new ``version`` (`glassllm.course.versions`).

The expected answers come from glassllm's own engine (`glassllm.sandbox.expr`): the
case's expression forward and backward, seeded with the case's ``grad_output``.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import hashlib
import hmac
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from glassllm.errors import InputError
from glassllm.sandbox import expr, registry
from glassllm.sandbox.limits import Limits

if TYPE_CHECKING:
    from glassllm.course.exercise import Exercise, Variable

__all__ = ["DEFAULT_SALT", "AnswerSpec", "Case", "CaseError", "Part", "build_case",
           "student_seed"]

DEFAULT_SALT = "glassllm-practice"     # GLASSLLM_COURSE_SALT's documented default
GENERATED = "generated"               # the name of a function exercise's own case
LIMITS = Limits()


class CaseError(ValueError):
    """An exercise whose case cannot be built: `field` (dotted) and `rule`."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field, self.rule = field, rule


def student_seed(salt: str, exercise: Exercise, student_id: str) -> int:
    """The seed of `student_id`'s numbers for `exercise` (anything with an ``id`` and an
    integer ``version``: an exercise, a mystery): the first 8 bytes, big-endian, of
    HMAC-SHA256(salt, id ‖ 0x00 ‖ version ‖ 0x00 ‖ student_id), UTF-8 throughout, the
    version in decimal digits.

    Example:
        >>> from types import SimpleNamespace
        >>> ex = SimpleNamespace(id="softmax-ce", version=1)
        >>> student_seed("glassllm-practice", ex, "ada") == student_seed(
        ...     "glassllm-practice", ex, "ada")
        True
        >>> student_seed("glassllm-practice", ex, "ada") != student_seed(
        ...     "glassllm-practice", ex, "alan")
        True
        >>> student_seed("glassllm-practice", ex, "ada") != student_seed(
        ...     "glassllm-practice", SimpleNamespace(id="softmax-ce", version=2), "ada")
        True
    """
    parts = (exercise.id, str(int(exercise.version)), student_id)
    message = b"\x00".join(s.encode("utf-8") for s in parts)
    digest = hmac.new(salt.encode("utf-8"), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class AnswerSpec:
    """One array the student gives: its key in ``answers``, its shape, and what it is."""

    key: str
    shape: tuple[int, ...]
    part: str                 # "case", or a function case's name ("generated", edge cases)
    of: str                   # "value", the variable whose gradient it is, or a return name

    def describe(self) -> dict:
        return {"key": self.key, "shape": list(self.shape), "case": self.part, "of": self.of}


@dataclass(frozen=True)
class Part:
    """One computed case: the variables' values, the seed of the backward, the answers."""

    name: str
    variables: dict[str, Any]
    grad_output: np.ndarray | None
    expected: dict[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class Case:
    """A student's case: their numbers (``variables``, ``grad_output``), the answers
    expected (``expected``, by answer key), and what each answer is (``answers``).

    A function exercise has several ``parts`` (the student's own, then each edge case);
    the others have one, named ``"case"``."""

    exercise: Exercise
    student: str
    seed: int
    parts: tuple[Part, ...]
    answers: tuple[AnswerSpec, ...]
    masks: dict[str, np.ndarray]          # the boolean variables: where a mistake may sit
    factors: dict[str, tuple[float, str]]  # name -> (size, what it is)

    @property
    def variables(self) -> dict[str, Any]:
        return self.parts[0].variables

    @property
    def grad_output(self) -> np.ndarray | None:
        return self.parts[0].grad_output

    @property
    def expected(self) -> dict[str, np.ndarray]:
        return {k: v for p in self.parts for k, v in p.expected.items()}

    @property
    def request(self) -> dict:
        """The student's case as a ``POST /api/v1/eval`` body (concrete values)."""
        body: dict[str, Any] = {"expression": self.exercise.expression,
                                "variables": {k: np.asarray(v).tolist()
                                              for k, v in self.variables.items()}}
        if self.grad_output is not None:
            body["grad_output"] = self.grad_output.tolist()
        return body


def draw(variable: Variable, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A generated variable's numbers (`shape` replaces a grad_output's absent shape)."""
    params = dict(variable.params)
    size = variable.shape if variable.shape is not None else shape
    if variable.distribution == "normal":
        out = rng.normal(params["mean"], params["std"], size)
    elif variable.distribution == "uniform":
        out = rng.uniform(params["low"], params["high"], size)
    elif variable.distribution == "integers":
        return np.asarray(rng.integers(params["low"], params["high"], size, dtype=np.int64))
    else:
        return np.asarray(rng.choice(np.asarray(params["values"]), size))
    if variable.decimals is not None:
        out = np.round(out, variable.decimals) + 0.0      # + 0.0: no -0.0 from rounding
    return np.asarray(out, dtype=np.float64)


def _spec(variable: Variable, value: Any) -> Any:
    if variable.requires_grad is None:
        return value
    return {"value": value, "requires_grad": variable.requires_grad}


def _evaluate(expression: str, variables: dict, grad_output: Any, where: str,
              limits: Limits) -> tuple[dict, tuple[int, ...]]:
    """The expression forward and backward (float64 arrays); its output's shape."""
    try:
        prepared = expr.prepare(expression, variables, None, limits=limits)
        shape = tuple(prepared.nodes[prepared.out_id].shape)
        if grad_output is not None:
            prepared = expr.prepare(expression, variables, np.asarray(grad_output),
                                    limits=limits)
        return expr.run(prepared, arrays=True), shape
    except InputError as exc:
        raise CaseError(where, str(exc)) from None


def complete(exercise: Exercise) -> Exercise:
    """`exercise` with what only its planned graph tells: which gradients a function
    answer returns (`FunctionSpec.grads_of`: its parameters that get one, in order)."""
    fn = exercise.answer.function
    if fn is None or fn.grads_of:
        return exercise
    rng = np.random.Generator(np.random.PCG64(0))
    variables = {v.name: _spec(v, _value(v, rng)) for v in exercise.variables}
    try:
        prepared = expr.prepare(exercise.expression, variables, None, limits=LIMITS)
    except InputError as exc:
        raise CaseError("case", str(exc)) from None
    with_grad = {n.name for n in prepared.checked}
    grads_of = tuple(p for p in fn.params if p in with_grad)
    if len(grads_of) != len(fn.returns):
        raise CaseError("answer.function.returns", f"gives {len(fn.returns)} arrays, but"
                        f" the case computes {len(grads_of)} gradients of the parameters"
                        f" ({', '.join(grads_of) or 'none'}): one return per gradient, in"
                        " the parameters' order")
    if fn.reference is not None and fn.reference not in (exercise.op, exercise.expression) \
            and {fn.reference} != called_ops(exercise.expression):
        raise CaseError("answer.function.reference", f"{fn.reference!r} is not the case's"
                        f" forward ({exercise.op or exercise.expression}); it names the op"
                        " whose VJP the function computes")
    function = dataclasses.replace(fn, grads_of=grads_of)
    answer = dataclasses.replace(exercise.answer, function=function)
    return dataclasses.replace(exercise, answer=answer)


def called_ops(expression: str) -> frozenset[str]:
    """The registry ops an expression calls by name (``rms_norm(x, w) * 2`` → rms_norm;
    not its operators or methods)."""
    tree = expr.parse(expression).tree
    return frozenset(n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id in registry.OPS)


def _value(variable: Variable, rng: np.random.Generator) -> Any:
    if variable.generated:
        return draw(variable, rng, ())
    return variable.value


def build_case(exercise: Exercise, student_id: str, salt: str = DEFAULT_SALT,
               limits: Limits = LIMITS) -> Case:
    """`student_id`'s case of `exercise` under `salt`: their numbers and the expected
    answers, computed by glassllm's engine. Deterministic: the same arguments give the
    same numbers in any process. Raises `CaseError` (field, rule) for an exercise whose
    case cannot be computed (the loader calls it once per file)."""
    key = (exercise, student_id, salt, limits)
    case = _CACHE.get(key)
    if case is None:
        case = _CACHE.put(key, _build(exercise, student_id, salt, limits))
    return case


class _Recent:
    """The most recently built cases, up to `limit` elements of arrays in all: a student's
    submission and hints rebuild nothing, and a worker's memory stays bounded whatever
    the exercises' sizes (a case is cheap to build again)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0
        self.cases: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple) -> Case | None:
        with self.lock:
            case = self.cases.get(key)
            if case is not None:
                self.cases.move_to_end(key)
            return case

    def put(self, key: tuple, case: Case) -> Case:
        size = _size(case)
        with self.lock:
            if size <= self.limit // 4 and key not in self.cases:
                self.cases[key] = case
                self.held += size
                while self.held > self.limit:
                    _, old = self.cases.popitem(last=False)
                    self.held -= _size(old)
        return case


def _size(case: Case) -> int:
    return sum(np.size(v) for p in case.parts for v in (*p.variables.values(),
                                                         *p.expected.values()))


_CACHE = _Recent(2_000_000)


def _build(exercise: Exercise, student_id: str, salt: str, limits: Limits) -> Case:
    seed = student_seed(salt, exercise, student_id)
    rng = np.random.Generator(np.random.PCG64(seed))
    values = {v.name: _value(v, rng) for v in exercise.variables}
    variables = {v.name: _spec(v, values[v.name]) for v in exercise.variables}
    answer = exercise.answer
    # the output's shape first (no compute), for ones or a generated grad_output
    try:
        prepared = expr.prepare(exercise.expression, variables, None, limits=limits)
    except InputError as exc:
        raise CaseError("case", str(exc)) from None
    out_shape = tuple(prepared.nodes[prepared.out_id].shape)
    grad_output = None
    if prepared.nodes[prepared.out_id].requires_grad:
        spec = answer.grad_output
        grad_output = np.asarray(np.ones(out_shape) if spec is None else draw(
            spec, rng, out_shape) if spec.generated else spec.value, dtype=np.float64)
    elif answer.kind != "value":
        raise CaseError("case", "the output requires no gradient: no variable it depends on"
                        " is a differentiable tensor")
    parts = []
    if answer.kind == "function":
        fn = answer.function
        own = {p: values[p] for p in fn.params if p != fn.grad_param}
        cases = [(GENERATED, own, grad_output, "answer.grad_output")]
        for k, fc in enumerate(fn.cases):
            given = dict(fc.values)
            cases.append((fc.name, {p: given[p] for p in own}, given[fn.grad_param],
                          f"answer.function.cases[{k}]"))
        for name, vals, g, where in cases:
            given = {p: _spec(exercise.variable(p), v) for p, v in vals.items()}
            result, _ = _evaluate(exercise.expression, given, g, where, limits)
            expected = {f"{name}/{ret}": result["grads"][of]
                        for ret, of in zip(fn.returns, fn.grads_of, strict=True)}
            # as the function will get them: arrays, a differentiable one as float64
            arrays = {p: np.asarray(v, dtype=np.float64 if p in fn.grads_of else None)
                      for p, v in vals.items()}
            g = np.asarray(g, dtype=np.float64)
            parts.append(Part(name, {**arrays, fn.grad_param: g}, g, expected))
        answers = tuple(AnswerSpec(f"{p.name}/{ret}", p.expected[f"{p.name}/{ret}"].shape,
                                   p.name, ret) for p in parts for ret in fn.returns)
    else:
        result, _ = _evaluate(exercise.expression, variables, grad_output, "answer.grad_output",
                              limits)
        if answer.kind == "value":
            expected = {"value": result["value"]}
        else:
            missing = [g for g in answer.grads if g not in result["grads"]]
            if missing:
                raise CaseError("answer.grads", f"{', '.join(missing)} gets no gradient in"
                                " this case (a constant, an index or a mask: L0.6)")
            expected = {g: result["grads"][g] for g in answer.grads}
        parts.append(Part("case", values, grad_output, expected))
        answers = tuple(AnswerSpec(k, v.shape, "case", k) for k, v in expected.items())
    masks = {k: np.asarray(v) for k, v in values.items() if np.asarray(v).dtype == bool}
    return Case(exercise, student_id, seed, tuple(parts), answers, masks,
                _factors(exercise, values))


def _factors(exercise: Exercise, values: dict) -> dict[str, tuple[float, str]]:
    out = {}
    for f in exercise.answer.factors:
        if f.value is not None:
            out[f.name] = (f.value, f.says)
            continue
        shape = np.shape(values[f.variable])
        if not -len(shape) <= f.axis < len(shape):
            raise CaseError("answer.factors", f"{f.variable} has {len(shape)} axes; no"
                            f" axis {f.axis}")
        out[f.name] = (float(shape[f.axis]), f.says)
    return out


def elements(case: Case) -> int:
    """Elements of every expected answer: the size of a submission."""
    return sum(math.prod(s.shape) for s in case.answers)
