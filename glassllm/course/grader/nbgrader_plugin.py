"""nbgrader's preprocessor: each glassllm grade cell's outcome is set by nbgrader's own
process from ``glassllm grade``, after execution, never by a cell of the student's kernel
(docs/grading.md#nbgrader).

In the course's ``nbgrader_config.py``::

    from glassllm.course.grader import nbgrader_plugin
    c = get_config()
    nbgrader_plugin.configure(c, exercises={"softmax-tests": "softmax-backward.toml"},
                              salt_file="/home/instructor/.glassllm-salt",
                              roster="roster.csv")

`configure` sets ``Autograde.autograde_preprocessors`` to nbgrader's own list with
`GlassllmGrade` where nbgrader's ``Execute`` was, and GlassllmGrade's traits:

- ``exercises``: each grade cell's ``grade_id`` → its exercise file (relative to the
  folder nbgrader runs in, the course's); the cell itself (an "Autograder tests" cell,
  locked: nbgrader restores its source from the gradebook) may hold a comment only;
- ``salt_file``, ``roster``, ``practice``, ``time_limit``: as ``glassllm grade``'s options;
- ``kernel`` (default False): with False, nbgrader starts no kernel at all: the student's
  code runs only in glassllm's child, and every other autograder-test cell is marked not
  run (0, saying why) — nbgrader's kernel would run the student's code as nbgrader's own
  user, beside the gradebook, started in a folder holding the student's files. With True,
  nbgrader's ``Execute`` runs first (for an assignment that mixes nbgrader's own tests):
  the glassllm cells' outcome is still set here, after it, from ``glassllm grade``.

The outcome: full marks, nothing but the verdict printed; part marks, the points as the
cell's result (nbgrader's partial credit); none, an error naming the verdict. The student
is nbgrader's student id (and the gradebook's email), resolved against the roster by
`identity.resolve`; a gradebook holding two students that fold alike, a student not on
the roster, a missing salt or a broken exercise file stop that student's autograde with
one line (`NotGraded`), so the gradebook holds no score rather than a 0.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from glassllm.course.grader import identity
from glassllm.course.grader.external import GradeError, grade_outside

# GlassllmGrade is made by the module's __getattr__ on first use (it needs nbgrader)
__all__ = ["GlassllmGrade", "NotGraded", "autograde_preprocessors", "configure"]  # noqa: F822


class NotGraded(RuntimeError):
    """A submission glassllm could not grade: its one line, in nbgrader's log."""


def _verdict(report: dict) -> str:
    lines = [f"{report['exercise']}: {report['score']:g} / {report['max_score']:g} points,"
             " graded by glassllm grade outside the notebook's kernel"]
    for t in report["tests"]:
        lines += [f"== {t['name']}: {t['score']:g} / {t['max_score']:g}", t["message"]]
        if t["table"]:
            lines.append(t["table"])
        if t["output"]:
            lines.append("your code printed:\n" + t["output"])
    return "\n".join(lines) + "\n"


def outputs(report: dict, points: float) -> list[dict]:
    """A grade cell's outputs for `report` at `points` (nbgrader's ``determine_grade``
    reads them): full marks, a stream only; part marks, the points as the cell's result;
    none, an error."""
    text = {"output_type": "stream", "name": "stdout", "text": _verdict(report)}
    most = report["max_score"]
    share = report["score"] / most if most else 0.0
    if share >= 1 - 1e-9:
        return [text]
    if share > 0:
        return [text, {"output_type": "execute_result", "execution_count": None,
                       "metadata": {}, "data": {"text/plain": repr(round(points * share, 6))}}]
    return [text, {"output_type": "error", "ename": "NotPassed",
                   "evalue": f"{report['exercise']}: 0 / {most:g} points",
                   "traceback": [f"NotPassed: {report['exercise']}: no case right"]}]


def _nbgrader(cell: Any) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


@functools.cache
def _classes() -> dict[str, type]:
    from nbformat import from_dict
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Bool, Dict, Float, Unicode

    class GlassllmGrade(NbGraderPreprocessor):
        """Sets each glassllm grade cell's outcome from ``glassllm grade`` (module's doc)."""

        exercises = Dict(help="grade_id -> exercise file").tag(config=True)
        salt_file = Unicode(None, allow_none=True, help="the course's salt file").tag(
            config=True)
        roster = Unicode(None, allow_none=True, help="the course's roster").tag(config=True)
        practice = Bool(False, help="the practice salt, no roster").tag(config=True)
        time_limit = Float(None, allow_none=True, help="seconds of student code").tag(
            config=True)
        kernel = Bool(False, help="nbgrader's Execute ran before").tag(config=True)

        def _student(self, student: str, db_url: str) -> str:
            with Gradebook(db_url) as gb:
                rows = [(s.id, s.email) for s in gb.students]
            record = identity.Roster("the nbgrader gradebook")
            for sid, _ in rows:
                record.add(sid, None, f"student {sid!r}")
            email = next((e for s, e in rows if s == student), None)
            roster = identity.load_roster(self.roster) if self.roster else None
            return identity.resolve([("nbgrader student", student), ("email", email or "")],
                                    roster, f"nbgrader student {student!r}",
                                    required=not self.practice)

        def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
            info = resources["nbgrader"]
            where = f"{info['student']}/{info['assignment']}/{info['notebook']}"
            cells: dict[str, list] = {}      # every cell of an id: none left out ungraded
            for c in nb.cells:
                if _nbgrader(c).get("grade"):
                    cells.setdefault(_nbgrader(c).get("grade_id"), []).append(c)
            missing = sorted(set(self.exercises) - set(cells))
            try:
                if missing:
                    raise GradeError(f"no grade cell with grade_id {missing[0]!r} in the"
                                     " notebook (GlassllmGrade.exercises)")
                student = self._student(info["student"], info["db_url"])
                with tempfile.TemporaryDirectory(prefix="glassllm-nb-") as private:
                    os.chmod(private, 0o700)
                    submitted = Path(private) / f"{info['notebook']}.ipynb"
                    submitted.write_text(json.dumps(nb), encoding="utf-8")
                    for grade_id, exercise in self.exercises.items():
                        report = grade_outside(
                            exercise, submitted, student=student, fmt="nbgrader",
                            salt_file=self.salt_file, roster=self.roster,
                            practice=self.practice, time_limit=self.time_limit)
                        for cell in cells[grade_id]:
                            cell.outputs = from_dict(outputs(report,
                                                             float(_nbgrader(cell)["points"])))
                        self.log.info("glassllm: %s %s: %s / %s, student %r", where, grade_id,
                                      report["score"], report["max_score"], student)
            except (GradeError, identity.IdentityError) as exc:
                raise NotGraded(f"glassllm could not grade {where}: {exc}") from None
            if not self.kernel:
                for cell in (c for i, group in cells.items() if i not in self.exercises
                             for c in group):
                    if cell.get("cell_type") == "code":
                        cell.outputs = from_dict([{
                            "output_type": "error", "ename": "NotRun",
                            "evalue": "not run: this assignment is graded outside the kernel"
                            " (GlassllmGrade.kernel = False)", "traceback": []}])
            return nb, resources

    return {"GlassllmGrade": GlassllmGrade}


def __getattr__(name: str) -> Any:
    if name == "GlassllmGrade":        # made on first use: it needs nbgrader's classes
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def autograde_preprocessors(kernel: bool = False) -> list:
    """nbgrader's ``Autograde.autograde_preprocessors`` with `GlassllmGrade` in
    ``Execute``'s place (``kernel=False``) or right after it (``kernel=True``)."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    ours = _classes()["GlassllmGrade"]
    out = []
    for pp in Autograde.autograde_preprocessors.default():
        if pp is Execute:
            out += [Execute, ours] if kernel else [ours]
        else:
            out.append(pp)
    return out


def configure(c: Any, exercises: dict[str, str], salt_file: str | None = None,
              roster: str | None = None, practice: bool = False,
              time_limit: float | None = None, kernel: bool = False) -> None:
    """Set nbgrader's config `c` (``get_config()`` of ``nbgrader_config.py``) to grade
    `exercises` (grade_id → exercise file) with `GlassllmGrade` (the module's doc)."""
    c.Autograde.autograde_preprocessors = autograde_preprocessors(kernel)
    grade = c.GlassllmGrade
    grade.exercises = copy.deepcopy(dict(exercises))
    grade.salt_file, grade.roster, grade.practice = salt_file, roster, practice
    grade.time_limit, grade.kernel = time_limit, kernel
