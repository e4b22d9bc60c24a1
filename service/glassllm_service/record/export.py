"""The gradebook: one row per student, per exercise the best score and the attempts, the
total of the graded ones, and the points each could earn.

**Graded** exercises are the course's own (``GLASSLLM_EXERCISES_DIR``), less its lessons
(`glassllm.course.Catalogue.graded`): ``total`` is the sum of their best scores, and
``total_possible`` of their points. **Practice** is everything else a student attempted —
the lessons, the shipped examples, an exercise no longer served — kept in columns of
its own after ``total``, never added to it.

CSV (RFC 4180, UTF-8, ``\\r\\n``; what a gradebook import reads): the header ``student``,
``display_name``, per graded exercise ``<id>`` (the best score, empty when never
attempted) and ``<id> attempts``, ``total``, then the practice exercises' two columns;
then a ``Points Possible`` row (Canvas's name for it: its import reads the row whose
first cell holds those words, and sets each column's points from it) with each graded
exercise's points, ``total_possible`` under ``total``, and nothing under the attempts and
practice columns; then the students. No student id can be ``Points Possible`` (an id has
no space). A cell a spreadsheet would run as a formula (starting ``=``, ``+``, ``-``,
``@``, a tab or a carriage return) is written with a leading ``'`` (OWASP's CSV
injection rule).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

FORMULA = ("=", "+", "-", "@", "\t", "\r")
POINTS_POSSIBLE = "Points Possible"


def table(students: list[Any], attempts: list[dict], graded: Iterable[tuple[str, float]],
          served: Iterable[str] = ()) -> dict:
    """The gradebook as data. `graded`: (id, points) of the graded exercises in the
    catalogue's order; `served`: the ids of every exercise served, to order the practice
    columns (those attempted; then any recorded one no longer served, by id). Every
    roster student and anyone with an attempt gets a row."""
    points = dict(graded)
    served = [ex for ex in served if ex not in points]
    attempted = {a["exercise"] for a in attempts} - set(points)
    practice = [ex for ex in served if ex in attempted] + sorted(attempted - set(served))
    names = {s.student: s.display_name for s in students}
    rows: dict[str, dict] = {s: {} for s in sorted(set(names) | {a["student"]
                                                                for a in attempts})}
    for a in attempts:
        cell = rows[a["student"]].setdefault(a["exercise"], {"best": None, "attempts": 0,
                                                             "passed": False})
        cell["attempts"] += 1
        cell["best"] = a["score"] if cell["best"] is None else max(cell["best"], a["score"])
        cell["passed"] = cell["passed"] or a["passed"]
    return {"exercises": list(points), "points_possible": points,
            "total_possible": sum(points.values(), 0.0), "practice": practice,
            "students": [{"student": s, "display_name": names.get(s),
                          "exercises": {ex: c for ex, c in rows[s].items() if ex in points},
                          "practice": {ex: c for ex, c in rows[s].items()
                                       if ex not in points},
                          "total": sum((c["best"] or 0.0 for ex, c in rows[s].items()
                                        if ex in points), 0.0)}
                         for s in rows]}


def _cell(value: Any) -> str:
    text = "" if value is None else (repr(value) if isinstance(value, float) else str(value))
    return "'" + text if text.startswith(FORMULA) else text


def _pairs(ids: list[str]) -> list[str]:
    return [c for ex in ids for c in (ex, f"{ex} attempts")]


def to_csv(book: dict) -> str:
    """`table`'s gradebook as CSV text."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    graded, practice = book["exercises"], book["practice"]
    w.writerow([_cell(v) for v in ("student", "display_name", *_pairs(graded), "total",
                                   *_pairs(practice))])
    possible = [c for ex in graded for c in (float(book["points_possible"][ex]), None)]
    w.writerow([_cell(v) for v in (POINTS_POSSIBLE, None, *possible,
                                   float(book["total_possible"]), *[None] * 2 * len(practice))])
    for row in book["students"]:
        cells = []
        for ex in graded:
            got = row["exercises"].get(ex)
            cells += [None, 0] if got is None else [got["best"], got["attempts"]]
        after = []
        for ex in practice:
            got = row["practice"].get(ex)
            after += [None, 0] if got is None else [got["best"], got["attempts"]]
        w.writerow([_cell(v) for v in (row["student"], row["display_name"], *cells,
                                       row["total"], *after)])
    return out.getvalue()
