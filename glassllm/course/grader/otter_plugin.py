"""otter-grader's plugin: the grade of each glassllm question comes from ``glassllm grade``
run by otter's own process after grading, never from a cell of the student's kernel
(docs/grading.md#otter-grader).

In the autograder's ``otter_config.json``::

    {"plugins": [{"glassllm.course.grader.otter_plugin.GlassllmGrade": {
        "questions": {"q1": "softmax-backward.toml"},
        "salt_file": "salt", "roster": "roster.csv"}}]}

Paths are relative to the autograder's ``source`` folder (the zip's root: never
``files/``, which otter copies beside the submission). The plugin's three events, in
otter's order:

- ``before_grading``: the submission's folder is emptied of everything but the notebook
  and otter's fresh ``tests/`` (so no ``.OTTER_LOG``, which otter would unpickle with
  dill, and no ``ipykernel_launcher.py`` or ``otter.py`` that the kernel, started in that
  folder, would import first); the exercise, salt and roster files made 0600;
- ``before_execution``: otter's kernel is given an empty notebook: none of the student's
  code runs there, as the grader's user (root on Gradescope);
- ``after_grading``: ``glassllm grade --format otter`` (`external.grade_outside`, a new
  isolated interpreter) grades the submitted notebook for each question; its score,
  scaled to the question's points, and its tests' messages replace the question's result.
  A student who cannot be named, a missing salt or a broken exercise file stops otter with
  the one line that says why (``OtterRuntimeError``): not a 0.

The student: Gradescope's ``submission_metadata.json`` (otter passes it) by
`identity.gradescope`; under ``otter run`` (no metadata) the config's ``student``. The
class needs nothing of otter to import: otter calls its events by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from glassllm.course.grader import identity
from glassllm.course.grader.external import GradeError, grade_outside

__all__ = ["GlassllmGrade"]

KEPT = ("tests",)                     # otter's own copy of the autograder's tests


class GlassllmGrade:
    """The plugin otter loads from ``otter_config.json`` (see the module): built with
    the submission's path, Gradescope's submission metadata and this plugin's config."""

    def __init__(self, submission_path: str, submission_metadata: dict | None,
                 plugin_config: dict | None):
        self.submission_path = Path(submission_path)
        self.submission_metadata = submission_metadata or {}
        self.plugin_config = plugin_config or {}
        self.source = self.submission_path.parent.parent / "source"
        questions = self.plugin_config.get("questions")
        if not isinstance(questions, dict) or not questions or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in questions.items()):
            raise ValueError("glassllm's otter plugin: config 'questions' must map each"
                             " question's name to its exercise file, e.g."
                             ' {"q1": "softmax-backward.toml"}')
        self.questions = questions

    def _path(self, key: str) -> Path | None:
        value = self.plugin_config.get(key)
        return None if value in (None, "") else self.source / str(value)

    def before_grading(self, config: Any) -> None:
        """Empty the submission's folder but for the notebook and ``tests/`` (otter's
        working folder: the kernel starts there), make the course's files 0600, and read
        nothing from otter's log."""
        here = Path.cwd()
        if here.resolve() != self.submission_path.parent.resolve():
            raise RuntimeError(f"glassllm's otter plugin: otter's working folder {here} is"
                               " not the submission's: this otter is not the one it knows")
        keep = {self.submission_path.name, *KEPT}
        for entry in here.iterdir():
            if entry.name in keep and not entry.is_symlink():
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        (here / "__init__.py").write_text("")        # otter imports the folder as a package
        for path in [self._path("salt_file"), self._path("roster"),
                     *(self.source / e for e in self.questions.values())]:
            if path is not None:
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o600)
        with contextlib.suppress(AttributeError):
            config.grade_from_log = False

    def before_execution(self, submission: Any) -> Any:
        """An empty notebook in the submission's place: otter's kernel runs none of the
        student's code (glassllm's child runs it, after)."""
        import nbformat

        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        return nb

    def _student(self) -> tuple[str | None, Path | None]:
        roster = self._path("roster")
        loaded = identity.load_roster(roster) if roster is not None else None
        practice = bool(self.plugin_config.get("practice"))
        if self.submission_metadata.get("users"):
            return identity.gradescope(self.submission_metadata, loaded,
                                       required=not practice), roster
        student = self.plugin_config.get("student")
        if isinstance(student, str) and student.strip():
            return student, roster
        if practice:
            return None, roster
        raise identity.IdentityError("otter: no submission metadata (otter run) and no"
                                     " 'student' in glassllm's plugin config: no student"
                                     " to grade for")

    def after_grading(self, results: Any) -> None:
        """Each question's result from ``glassllm grade`` on the submitted notebook."""
        from otter.run.run_autograder.utils import OtterRuntimeError
        from otter.test_files.abstract_test import TestCaseResult

        try:
            student, roster = self._student()
            for question, exercise in self.questions.items():
                test_file = results.results.get(question)
                if test_file is None or not test_file.test_cases:
                    raise GradeError(f"question {question!r} has no test file"
                                     f" tests/{question}.py in the autograder")
                report = grade_outside(
                    self.source / exercise, self.submission_path, student=student,
                    fmt="otter", salt_file=self._path("salt_file"), roster=roster,
                    practice=bool(self.plugin_config.get("practice")),
                    time_limit=self.plugin_config.get("time_limit"))
                points, most = test_file.possible, report["max_score"]
                case, made = test_file.test_cases[0], []
                for t in report["tests"]:
                    text = "\n\n".join(p for p in (t["message"], t["table"], t["output"] and
                                                   "your code printed:\n" + t["output"]) if p)
                    made.append(TestCaseResult(test_case=replace(
                        case, name=f"{question} - {t['name']}", hidden=False,
                        points=points * t["max_score"] / most if most else 0,
                        success_message=text, failure_message=None),
                        message=text, passed=bool(t["passed"])))
                test_file.test_case_results = made
                test_file.update_score(round(points * report["score"] / most, 6)
                                       if most else 0)
                print(f"glassllm: {question}: {report['exercise']}: {report['score']:g} /"
                      f" {most:g}, student {report['student']!r}")
        except (GradeError, identity.IdentityError) as exc:
            raise OtterRuntimeError(f"glassllm could not grade this submission: {exc}"
                                    ) from None
