"""The gradebook: one row per student, per exercise the best score and the attempts.

CSV (RFC 4180, UTF-8, ``\\r\\n``; what a gradebook import reads) and JSON. Columns:
``student``, ``display_name``, then for every exercise ``<id>`` (the best score, empty
when never attempted) and ``<id> attempts``, then ``total`` (the sum of the best scores).
A cell a spreadsheet would run as a formula (starting ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return) is written with a leading ``'`` (OWASP's CSV injection rule).
"""

from __future__ import annotations

import csv
import io
from typing import Any

FORMULA = ("=", "+", "-", "@", "\t", "\r")


def table(students: list[Any], attempts: list[dict], exercises: list[str]) -> dict:
    """The gradebook as data: exercises in the catalogue's order (then any recorded one no
    longer served), every roster student and anyone with an attempt."""
    seen = list(exercises) + sorted({a["exercise"] for a in attempts} - set(exercises))
    names = {s.student: s.display_name for s in students}
    rows: dict[str, dict] = {s: {} for s in sorted(set(names) | {a["student"]
                                                                for a in attempts})}
    for a in attempts:
        cell = rows[a["student"]].setdefault(a["exercise"], {"best": None, "attempts": 0,
                                                             "passed": False})
        cell["attempts"] += 1
        cell["best"] = a["score"] if cell["best"] is None else max(cell["best"], a["score"])
        cell["passed"] = cell["passed"] or a["passed"]
    return {"exercises": seen,
            "students": [{"student": s, "display_name": names.get(s),
                          "exercises": rows[s],
                          "total": sum((c["best"] or 0.0 for c in rows[s].values()), 0.0)}
                         for s in rows]}


def _cell(value: Any) -> str:
    text = "" if value is None else (repr(value) if isinstance(value, float) else str(value))
    return "'" + text if text.startswith(FORMULA) else text


def to_csv(book: dict) -> str:
    """`table`'s gradebook as CSV text."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(["student", "display_name",
                *[c for ex in book["exercises"] for c in (ex, f"{ex} attempts")], "total"])
    for row in book["students"]:
        cells = []
        for ex in book["exercises"]:
            got = row["exercises"].get(ex)
            cells += [None, 0] if got is None else [got["best"], got["attempts"]]
        w.writerow([_cell(v) for v in (row["student"], row["display_name"], *cells,
                                       row["total"])])
    return out.getvalue()
