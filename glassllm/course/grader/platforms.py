"""Where each grading platform puts the exercise, the submission and the results, so its
image runs ``glassllm grade --platform NAME`` with nothing else to say (docs/grading.md).

- ``prairielearn`` (external grading): the exercise is the one ``*.toml`` of
  ``/grade/tests`` (the question's ``tests/`` folder), the submission the first ``.py``,
  ``.ipynb`` or ``.json`` file of ``/grade/student``, the student id
  ``params.student`` of ``/grade/data/data.json`` (else the variant's seed), the results
  ``/grade/results/results.json`` in PrairieLearn's format;
- ``gradescope`` (the autograder's layout): the exercise is the one ``*.toml`` of
  ``/autograder/source``, the submission the first such file of
  ``/autograder/submission``, the student the first user's email of
  ``/autograder/submission_metadata.json``, the results
  ``/autograder/results/results.json`` in Gradescope's format.

A missing submission is graded as one (every test 0: it cannot be read); a missing or
broken exercise file writes "not graded" results and exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["PLATFORMS", "locate"]

PLATFORMS = {
    "prairielearn": {"exercise": "grade/tests", "submission": "grade/student",
                     "results": "grade/results/results.json", "format": "prairielearn"},
    "gradescope": {"exercise": "autograder/source", "submission": "autograder/submission",
                   "results": "autograder/results/results.json", "format": "gradescope"},
}
SUBMITTED = (".py", ".ipynb", ".json")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _student(platform: str, root: Path) -> str:
    if platform == "prairielearn":
        data = _json(root / "grade/data/data.json") or {}
        params = data.get("params") if isinstance(data, dict) else None
        if isinstance(params, dict) and isinstance(params.get("student"), str):
            return params["student"]
        seed = data.get("variant_seed") if isinstance(data, dict) else None
        return f"variant-{seed}" if seed is not None else "practice"
    meta = _json(root / "autograder/submission_metadata.json") or {}
    users = meta.get("users") if isinstance(meta, dict) else None
    if isinstance(users, list) and users and isinstance(users[0], dict):
        return str(users[0].get("email") or users[0].get("id") or "practice")
    return "practice"


def locate(platform: str, root: str | Path = "/") -> dict[str, Any]:
    """The paths and the student of `platform`'s layout under `root`: ``exercise``,
    ``submission``, ``results``, ``format``, ``student``."""
    layout, root = PLATFORMS[platform], Path(root)
    tomls = sorted((root / layout["exercise"]).glob("*.toml"))
    folder = root / layout["submission"]
    found = sorted(p for p in folder.glob("*") if p.suffix in SUBMITTED and p.is_file()) \
        if folder.is_dir() else []
    return {"exercise": tomls[0] if len(tomls) == 1 else root / layout["exercise"]
            / "exercise.toml",
            "submission": found[0] if found else folder / "submission.py",
            "results": root / layout["results"], "format": layout["format"],
            "student": _student(platform, root)}
