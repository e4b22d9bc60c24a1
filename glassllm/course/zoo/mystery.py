"""Mystery mode: one unknown wrong backward rule, switched on in a case, to find and prove.

A mystery is an exercise file of kind ``"mystery"`` (docs/mystery.md): a case (an
expression and fixed numbers) and the pool of zoo bugs it may hide, each of an op the
case calls. Each student gets one bug of the pool, picked like an exercise's numbers:
from ``HMAC-SHA256(salt, id ‖ 0x00 ‖ version ‖ 0x00 ‖ student)``
(`glassllm.course.cases.student_seed`), so any worker, replica or the offline grader
picks the same one and nothing is stored; a typo fixed in the text changes no one's bug,
a change to the case or the pool is a new ``version``. The bug's id is never served: a student sees
only what the case computes under it.

The hunt runs with the tools, under the bug: evaluations (`evaluate`: values, gradients,
path shares, the Taylor test, the dead-gradient report), any expression the student
writes, with the student's bug swapped in through the evaluator's ``rules`` for that one
call. The proof (`grade`) names a node of the case and gives an input; it is right when
the node's op is the bug's, and the input exposes the bug when the Taylor test of the
case at that input fails under the bug and passes under the real rules (so an input on
a kink proves nothing).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glassllm.course.cases import DEFAULT_SALT, student_seed
from glassllm.course.zoo import BUGS, Bug, rules_for
from glassllm.sandbox import expr
from glassllm.sandbox.expr import ExprError

__all__ = ["MYSTERIES_DIR", "TAYLOR", "Mystery", "MysteryError", "MysteryGrade", "bug_for",
           "evaluate", "grade", "load", "load_dir", "proof_variables"]

MYSTERIES_DIR = Path(__file__).resolve().parent.parent / "mysteries"
ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
KEYS = {"kind", "id", "version", "title", "text", "points", "bugs", "case"}
MAX_VERSION = 1_000_000
TAYLOR = {"modes": ["taylor"]}
MAX_FILE_BYTES = 200_000


class MysteryError(ValueError):
    """A mystery file that cannot be used: the file, the field and the rule."""

    def __init__(self, file: str, field: str, rule: str) -> None:
        super().__init__(f"{file}: {field}: {rule}")
        self.file, self.field, self.rule = file, field, rule


@dataclass(frozen=True)
class Mystery:
    """One mystery: its case (``expression``, fixed ``variables`` as an eval request's)
    and the ``bugs`` it may hide (zoo ids, each of an op the case calls)."""

    id: str
    title: str
    text: str
    expression: str
    variables: dict
    bugs: tuple[str, ...]
    points: float = 1.0
    file: str = ""
    content_hash: str = ""
    version: int = 1                 # with the id, the seed of each student's pick

    def view(self) -> dict:
        """What a student is shown: never the bug, nor the pool."""
        return {"id": self.id, "kind": "mystery", "title": self.title, "text": self.text,
                "points": self.points, "expression": self.expression,
                "variables": self.variables}


def bug_for(mystery: Mystery, student: str, salt: str = DEFAULT_SALT) -> Bug:
    """The bug `student` hunts in `mystery`: the pool's entry at the student's seed."""
    seed = student_seed(salt, mystery, student)
    bug_id = mystery.bugs[seed % len(mystery.bugs)]
    return next(b for b in BUGS if b.id == bug_id)


def evaluate(mystery: Mystery, student: str, salt: str = DEFAULT_SALT, **request: Any) -> dict:
    """`glassllm.sandbox.expr.evaluate` with the student's bug switched on for this call
    (`request` is an eval request: expression, variables, check, paths, dead, ...)."""
    return expr.evaluate(rules=rules_for(bug_for(mystery, student, salt).id), **request)


@dataclass(frozen=True)
class MysteryGrade:
    """A proof graded: ``node_right`` (the node's op is the bug's), ``input_exposes``
    (the Taylor test fails at the input under the bug and passes under the real rules),
    ``score`` (half the points each), ``orders`` (the Taylor order under the bug and
    under the real rules; None for linear or unmeasured), and ``message`` in words."""

    node_right: bool
    input_exposes: bool
    score: float
    points: float
    orders: dict
    message: str

    def as_dict(self) -> dict:
        return {"node_right": self.node_right, "input_exposes": self.input_exposes,
                "score": self.score, "points": self.points, "orders": self.orders,
                "message": self.message}


def grade(mystery: Mystery, student: str, node: Any, variables: Any = None,
          salt: str = DEFAULT_SALT, limits: Any = None) -> MysteryGrade:
    """Grade a mystery proof: the node named (an id of the case's graph, or its source
    text) and the input (the case's variables, each replaced where given).

    Pure: the same file, salt, student and proof give the same grade anywhere (the
    offline grader runs it as the service does). Raises `ExprError` for an input the
    case cannot evaluate, and ValueError naming ``node`` for a node the case lacks."""
    bug = bug_for(mystery, student, salt)
    given = proof_variables(mystery, variables)
    extra = {} if limits is None else {"limits": limits}
    real = expr.evaluate(mystery.expression, given, check=TAYLOR, **extra)
    chosen = _node(real["nodes"], node)
    node_right = chosen["op"] == bug.op
    wrong = expr.evaluate(mystery.expression, given, check=TAYLOR, rules=rules_for(bug.id),
                          **extra)
    t_wrong, t_real = wrong["check"]["taylor"], real["check"]["taylor"]
    exposes = bool(t_real["passed"]) and not t_wrong["passed"] and not t_wrong["linear"]
    score = mystery.points * (0.5 * node_right + 0.5 * exposes)
    said = [("the node is right: its op's backward is the wrong one" if node_right else
             f"node {chosen['id']} `{chosen['text']}` computes its gradient correctly"),
            ("the input exposes it: the Taylor test fails there under the bug and passes"
             " under the real rules" if exposes else
             "the input does not expose it: " + (
                 "the Taylor test passes there even under the bug" if t_wrong["passed"] else
                 "the Taylor test fails under the real rules too (a kink?)"))]
    return MysteryGrade(node_right, exposes, score, mystery.points,
                        {"bug": t_wrong["order"], "real": t_real["order"]}, "; ".join(said))


def proof_variables(mystery: Mystery, variables: Any) -> dict:
    """The case's variables with a proof's replacements; ValueError naming ``variables``
    for one the case does not have."""
    given = dict(mystery.variables)
    if variables is not None:
        if not isinstance(variables, dict):
            raise ValueError("variables: an object, name → value")
        unknown = sorted(set(variables) - set(given))
        if unknown:
            raise ValueError(f"variables: the case has no variable {unknown[0]!r}; its"
                             f" variables are {', '.join(sorted(given))}")
        given.update(variables)
    return given


def _node(nodes: list[dict], node: Any) -> dict:
    if isinstance(node, bool) or not isinstance(node, int | str):
        raise ValueError("node: a node id (an integer) or its source text")
    for n in nodes:
        if (isinstance(node, int) and n["id"] == node) or (isinstance(node, str)
                                                           and n["text"] == node):
            return n
    raise ValueError(f"node: the case has no node {node!r} (ids 0 to {len(nodes) - 1})")


# --------------------------------------------------------------------------------------
# the files
# --------------------------------------------------------------------------------------

def parse(file: str, data: bytes) -> Mystery:
    """A mystery file read and checked: keys, types, every bug a zoo bug of an op the
    case calls, and exposed by the file's own case (its Taylor test fails under the bug
    and passes under the real rules), so every student's bug can be found."""
    try:
        t = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise MysteryError(file, "-", f"is not UTF-8 TOML: {exc}") from None
    extra = sorted(set(t) - KEYS)
    if extra:
        raise MysteryError(file, extra[0], f"is not a key of a mystery ({', '.join(sorted(KEYS))})")
    if t.get("kind") != "mystery":
        raise MysteryError(file, "kind", 'must be "mystery"')
    if not isinstance(t.get("id"), str) or not ID.fullmatch(t["id"]):
        raise MysteryError(file, "id", "1 to 64 of a-z, 0-9 and -")
    for key in ("title", "text"):
        if not isinstance(t.get(key), str) or not t[key].strip():
            raise MysteryError(file, key, "a non-empty string")
    version = t.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) \
            or not 1 <= version <= MAX_VERSION:
        raise MysteryError(file, "version", f"an integer from 1 to {MAX_VERSION}")
    points = t.get("points", 1.0)
    if isinstance(points, bool) or not isinstance(points, int | float) or not 0 <= points <= 1000:
        raise MysteryError(file, "points", "a number from 0 to 1000")
    case = t.get("case")
    if not isinstance(case, dict) or set(case) - {"expression", "variables"} \
            or not isinstance(case.get("expression"), str) \
            or not isinstance(case.get("variables"), dict):
        raise MysteryError(file, "case", "a table with expression (a string) and variables")
    known = {b.id: b for b in BUGS}
    bugs = t.get("bugs")
    if not isinstance(bugs, list) or not bugs or not all(isinstance(b, str) for b in bugs):
        raise MysteryError(file, "bugs", "a non-empty list of bug ids")
    for k, b in enumerate(bugs):
        if b not in known:
            raise MysteryError(file, f"bugs[{k}]", f"{b!r} is not a bug of the zoo")
    mystery = Mystery(t["id"], t["title"], t["text"], case["expression"],
                      dict(case["variables"]), tuple(bugs), float(points), file,
                      hashlib.sha256(data).hexdigest(), version)
    try:
        real = expr.evaluate(mystery.expression, mystery.variables, check=TAYLOR)
    except ExprError as exc:
        raise MysteryError(file, "case", str(exc)) from None
    ops = {n["op"] for n in real["nodes"]}
    for k, b in enumerate(bugs):
        if known[b].op not in ops:
            raise MysteryError(file, f"bugs[{k}]", f"{b!r} spoils {known[b].op}, which the"
                               " case does not call")
        wrong = expr.evaluate(mystery.expression, mystery.variables, check=TAYLOR,
                              rules=rules_for(b))["check"]["taylor"]
        if wrong["passed"] or not real["check"]["taylor"]["passed"]:
            raise MysteryError(file, f"bugs[{k}]", f"the case's own numbers do not expose {b!r}"
                               " (its Taylor test must fail under the bug, pass without)")
    return mystery


def load(path: str | Path) -> Mystery:
    """Read and check one mystery file; raises `MysteryError`."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise MysteryError(str(path), "-", f"is larger than {MAX_FILE_BYTES} bytes")
    return parse(str(path), data)


def load_dir(path: str | Path = MYSTERIES_DIR) -> list[Mystery]:
    """Every ``*.toml`` of a folder, by file name; the same id twice is an error."""
    found: dict[str, Mystery] = {}
    for file in sorted(Path(path).glob("*.toml")):
        m = load(file)
        if m.id in found:
            raise MysteryError(str(file), "id", f"{m.id!r} is also {found[m.id].file}")
        found[m.id] = m
    return list(found.values())
