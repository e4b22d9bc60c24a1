"""What a course's exercises hide at a moment, and why: the instructor's view
(docs/modes.md#what-is-hidden-now).

`report(course, at)` lists, for the moment `at` (default now), every exercise that hides
something, open or not: its parts (``hide``), its ops (``hide_ops``), its window
(``opens`` → ``closes``, the moment its hiding ends) and the ops whose requests it
reaches — each op that runs a hidden one (`glassllm.sandbox.registry.closure.runners`:
hiding ``matmul`` reaches ``linear``, ``swiglu``, ``attention``, ``transformer_block``);
then, per op and part, the open exercises hiding it. Served to instructors at ``GET
/api/v1/hidden``; printed by ``glassllm-sandbox hidden`` from the sandbox's settings, the
same answer without a server.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

import orjson

from glassllm.sandbox.registry.closure import runners
from glassllm_service.course_state import CourseState

__all__ = ["main", "parse_moment", "report", "text"]


def parse_moment(value: str) -> dt.datetime:
    """An ISO 8601 moment with its offset (``2026-03-02T09:00:00+01:00``, ``...Z``);
    ValueError naming the rule for anything else."""
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 moment with its offset, e.g."
                         " 2026-03-02T09:00:00+00:00")
    return moment.astimezone(dt.UTC)


def _when(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(dt.UTC).isoformat()


def report(course: CourseState, at: dt.datetime | None = None) -> dict[str, Any]:
    """What `course`'s exercises hide at `at` (default now), and why (module docstring)."""
    at = at or course.now()
    hidden = course.hidden(at)
    exercises = []
    for ex in course.catalogue:
        if not ex.hide:
            continue
        if course.course and not ex.is_open(at):
            state = "not open yet" if ex.opens is not None and at < ex.opens else "closed"
        else:
            state = "open"
        reaches = sorted({r for op in ex.hide_ops for r in runners(op)})
        exercises.append({
            "id": ex.id, "title": ex.title, "state": state, "hiding": course.course and
            state == "open", "opens": _when(ex.opens), "closes": _when(ex.closes),
            "hide": sorted(ex.hide), "hide_ops": sorted(ex.hide_ops), "reaches": reaches})
    ops: dict[str, dict[str, list[str]]] = {}
    for part, by_op in sorted(hidden.parts.items()):
        for op, who in by_op.items():
            ops.setdefault(op, {})[part] = list(who)
    return {"at": _when(at), "mode": course.settings.mode, "hiding": bool(hidden),
            "ops": dict(sorted(ops.items())), "exercises": exercises}


def text(found: dict[str, Any]) -> str:
    """`report`'s answer as lines for a terminal."""
    lines = [f"{found['mode']} mode at {found['at']}: " + (
        "nothing is hidden (practice mode hides nothing)" if found["mode"] != "course"
        else "these exercises hide what follows" if found["hiding"] else "nothing is hidden")]
    for ex in found["exercises"]:
        window = f"{ex['opens'] or 'always'} → {ex['closes'] or 'no end'}"
        lines.append(f"  {ex['id']} ({ex['state']}, {window}): hides"
                     f" {', '.join(ex['hide'])} of {', '.join(ex['hide_ops'])}")
        lines.append(f"    reaches the requests that run: {', '.join(ex['reaches'])}")
    for op, parts in found["ops"].items():
        said = "; ".join(f"{part} by {', '.join(who)}" for part, who in parts.items())
        lines.append(f"  {op}: {said}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """``glassllm-sandbox hidden [--at MOMENT] [--json]``: `report` of the exercises the
    sandbox's settings serve (GLASSLLM_MODE, GLASSLLM_EXERCISES_DIR, ...)."""
    parser = argparse.ArgumentParser(
        prog="glassllm-sandbox hidden", description="What the course's exercises hide now"
        " (or at --at), and why: each exercise's parts, ops, window and the requests it"
        " reaches (docs/modes.md)")
    parser.add_argument("--at", type=_moment, default=None,
                        help="an ISO 8601 moment with its offset (default now)")
    parser.add_argument("--json", action="store_true", help="the answer of GET /api/v1/hidden")
    args = parser.parse_args(argv)
    from glassllm.course import ExerciseFileError
    from glassllm_service.settings import Settings, SettingsError
    try:
        course = CourseState.from_settings(Settings())
    except (SettingsError, ExerciseFileError) as exc:
        raise SystemExit(f"glassllm-sandbox hidden: {exc}") from None
    found = report(course, args.at)
    sys.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n"
                     if args.json else text(found))
    return 0


def _moment(value: str) -> dt.datetime:
    try:
        return parse_moment(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
