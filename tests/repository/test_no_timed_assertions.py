"""No test compares a clock: `make test` must be green on a busy 2-core machine, where any
bound on how long something took is a coin toss. Speed belongs in `bench/`, printed as
ratios measured side by side (the brief's rule).

Read with `ast`, nothing run: in every test module (``tests/``; `bench/` is the place for
times), an ``assert`` fails this test when its condition reads a clock — a call of
``time.time``, ``time.monotonic``, ``time.perf_counter``, ``time.process_time``,
``time.thread_time`` (or their ``_ns`` forms), or a name or attribute that was assigned
from one in the same function (``t0 = time.monotonic()``, ``took = time.monotonic() - t0``,
``done.seconds = ...``), followed through assignments. A deadline that only stops a wait
from hanging forever is written as a loop condition or with `waiting.wait_until`, which
raises when a generous timeout passes: it bounds a hang, it does not grade a speed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from paths import ROOT

CLOCKS = {f"{base}{ns}" for base in ("time", "monotonic", "perf_counter", "process_time",
                                     "thread_time") for ns in ("", "_ns")}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in CLOCKS and isinstance(f.value, ast.Name) \
            and f.value.id == "time":
        return True
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


def _names(node: ast.AST) -> set[str]:
    """Names and attribute names read in `node`."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def _reads_clock(node: ast.AST, timed: set[str]) -> bool:
    return any(_is_clock_call(n) for n in ast.walk(node)) or bool(_names(node) & timed)


def _targets(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute):
        return {target.attr}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(_targets(t) for t in target.elts))
    return set()


SCOPES = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.Module


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of `scope`, not descending into the functions defined inside it (each is
    a scope of its own: a name timed in one test says nothing of another's)."""
    out, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return out


def timed_asserts(source: str) -> list[int]:
    """Line numbers of the asserts in `source` whose condition reads a clock."""
    tree = ast.parse(source)
    found = set()
    for scope in (n for n in ast.walk(tree) if isinstance(n, SCOPES)):
        body = _own_nodes(scope)
        timed: set[str] = set()
        for _ in range(5):                         # follow assignments a few steps deep
            before = len(timed)
            for n in body:
                if isinstance(n, ast.Assign) and _reads_clock(n.value, timed):
                    for t in n.targets:
                        timed |= _targets(t)
                elif isinstance(n, ast.AugAssign | ast.AnnAssign) and n.value is not None \
                        and _reads_clock(n.value, timed):
                    timed |= _targets(n.target)
            if len(timed) == before:
                break
        for n in body:
            if isinstance(n, ast.Assert) and _reads_clock(n.test, timed):
                found.add(n.lineno)
    return sorted(found)


def test_the_checker_finds_a_timed_assertion_and_leaves_a_deadline_loop_alone():
    timed = ("import time\ndef test_x():\n    t0 = time.monotonic()\n    work()\n"
             "    took = time.monotonic() - t0\n    assert took < 8\n"
             "    assert time.perf_counter() > 0\n")
    assert timed_asserts(timed) == [6, 7]
    loop = ("import time\ndef test_y():\n    deadline = time.monotonic() + 60\n"
            "    while time.monotonic() < deadline:\n        if ready():\n            break\n"
            "    assert ready()\n")
    assert timed_asserts(loop) == []
    attr = ("import time\ndef test_z():\n    done = run()\n"
            "    done.seconds = time.monotonic() - 1\n    assert done.seconds < 3\n")
    assert timed_asserts(attr) == [5]


def test_no_test_asserts_on_a_clock():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path == Path(__file__):
            continue
        for line in timed_asserts(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, ("asserts that compare a clock (move the figure to bench/, or"
                           " bound a wait with waiting.wait_until): " + ", ".join(offenders))
