"""A `Report` in each grader's own results format (docs/grading.md):

- ``gradescope``: Gradescope's ``results.json`` (Autograder Specifications,
  https://gradescope-autograders.readthedocs.io/en/latest/specs/): ``score``,
  ``max_score``, ``output``, ``tests`` of ``name``, ``score``, ``max_score``, ``status``,
  ``output``, ``output_format``, ``visibility``; text output (it takes no image);
- ``prairielearn``: PrairieLearn's external grading ``/grade/results/results.json``
  (https://docs.prairielearn.com/externalGrading/): ``gradable``, ``score`` in 0..1,
  ``message``, ``output``, ``tests`` of ``name``, ``points``, ``max_points``,
  ``message``, ``output``, ``images`` (``{label, url}``, a ``data:image/png;base64``
  URL): under 1 MB in all (images then outputs give way first);
- ``json``: glassllm's own, every verdict as the sandbox's check gives it (``otter`` and
  ``nbgrader``: the same, read by their plugins);
- ``text``: a readable report.
"""

from __future__ import annotations

import base64
import json

from glassllm.course.grader.results import Report, TestResult

__all__ = ["FORMATS", "protections_log", "render"]

PRAIRIELEARN_LIMIT = 1_000_000     # bytes: PrairieLearn refuses a larger results file


def _test_text(t: TestResult) -> str:
    parts = [t.message]
    if t.table:
        parts.append(t.table)
    if t.output.strip():
        parts.append("your code printed:\n" + t.output.rstrip())
    return "\n\n".join(parts)


def _overall(report: Report) -> str:
    # never the protections that were off: the student would learn where to push; they
    # go to the instructor's log (`protections_log`)
    return report.summary()


def protections_log(report: Report) -> str:
    """The protections off on this grader, one line for the instructor's log
    (Gradescope's stdout, hidden from students; PrairieLearn's job log; stderr), or ''."""
    if not report.protections_off:
        return ""
    return "glassllm grade: protections off on this grader: " + "; ".join(
        report.protections_off)


def gradescope(report: Report) -> dict:
    return {
        "score": report.score, "max_score": report.max_score,
        "execution_time": round(report.seconds, 3),
        "output": _overall(report), "output_format": "text",
        "visibility": "visible", "stdout_visibility": "hidden",
        "tests": [{"name": t.name, "name_format": "text", "score": round(t.score, 6),
                   "max_score": round(t.max_score, 6),
                   "status": "passed" if t.passed else "failed",
                   "output": _test_text(t), "output_format": "text",
                   "visibility": "visible"} for t in report.tests],
        "extra_data": {"exercise": report.exercise, "student": report.student,
                       "graded": report.graded},
    }


def _image(t: TestResult) -> list[dict]:
    if t.heatmap is None:
        return []
    return [{"label": f"{t.name}: where the wrong elements are (orange)",
             "url": "data:image/png;base64," + base64.b64encode(t.heatmap).decode()}]


def prairielearn(report: Report) -> dict:
    def build(images: bool, clip: int | None) -> dict:
        def cut(text: str) -> str:
            return text if clip is None or len(text) <= clip else text[:clip] + "\n[...]"
        return {
            "gradable": report.graded,
            "score": report.score / report.max_score if report.max_score else 0.0,
            "message": report.summary(),
            "output": _overall(report),
            "tests": [{"name": t.name, "points": round(t.score, 6),
                        "max_points": round(t.max_score, 6),
                       "message": cut(t.message), "output": cut(_test_text(t)),
                       "images": _image(t) if images else []} for t in report.tests],
        }

    for images, clip in ((True, None), (False, None), (False, 4000), (False, 500)):
        out = build(images, clip)
        if len(json.dumps(out).encode()) < PRAIRIELEARN_LIMIT:
            return out
    return build(False, 100)


def plain_json(report: Report) -> dict:
    return {"exercise": report.exercise, "title": report.title, "student": report.student,
            "score": report.score, "max_score": report.max_score,
            "feedback": report.feedback, "seconds": round(report.seconds, 3),
            "graded": report.graded,
            "tests": [{"name": t.name, "score": round(t.score, 6),
                       "max_score": round(t.max_score, 6), "passed": t.passed,
                       "message": t.message, "table": t.table,
                       "output": t.output, "answers": t.verdicts} for t in report.tests]}


def text(report: Report) -> str:
    out = [f"{report.title} ({report.exercise}), student {report.student}",
           _overall(report), ""]
    for t in report.tests:
        out.append(f"== {t.name}: {t.score:g} / {t.max_score:g}")
        out.append(_test_text(t))
        out.append("")
    return "\n".join(out)


# otter and nbgrader: glassllm's own JSON, read by their plugins (otter_plugin,
# nbgrader_plugin); named apart so that the practice salt is refused for them too
FORMATS = {"gradescope": gradescope, "prairielearn": prairielearn, "json": plain_json,
           "text": text, "otter": plain_json, "nbgrader": plain_json}


def render(report: Report, fmt: str) -> str:
    """The results file's text in format `fmt` (one of `FORMATS`)."""
    made = FORMATS[fmt](report)
    if isinstance(made, str):
        return made
    return json.dumps(made, ensure_ascii=False, allow_nan=False, indent=1) + "\n"
