"""Where each grading platform puts the exercise, the submission, the results, the
course's salt and roster, and who the student is, so its image runs ``glassllm grade
--platform NAME`` with nothing else to say (docs/grading.md#grading-platforms).

- ``prairielearn`` (external grading): the exercise is the one ``*.toml`` of
  ``/grade/tests`` (the question's ``tests/`` folder), the submission the first ``.py``,
  ``.ipynb`` or ``.json`` file of ``/grade/student``, the results
  ``/grade/results/results.json`` in PrairieLearn's format; the salt
  ``/grade/serverFilesCourse/glassllm/salt`` and the roster
  ``/grade/serverFilesCourse/glassllm/roster.csv`` (the course's ``serverFilesCourse``,
  never sent to a browser, listed in the question's ``externalGradingOptions``); the
  student `identity.prairielearn` of ``/grade/data/data.json``;
- ``gradescope`` (the autograder's layout): the exercise is the one ``*.toml`` of
  ``/autograder/source``, the submission the first such file of
  ``/autograder/submission``, the results ``/autograder/results/results.json`` in
  Gradescope's format; the salt ``/autograder/source/salt`` and the roster
  ``/autograder/source/roster.csv`` (in the autograder zip, which students never see);
  the student `identity.gradescope` of ``/autograder/submission_metadata.json``.

The exercise, salt and roster files are made 0600 before any student code runs (the
student's code runs as another user where the grader is root). A missing submission is
graded as one (every test 0: it cannot be read); a missing or broken exercise file, and a
student who cannot be named, write "not graded" results and exit 2.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from glassllm.course.grader import identity

__all__ = ["PLATFORMS", "locate", "student"]

PLATFORMS = {
    "prairielearn": {"exercise": "grade/tests", "submission": "grade/student",
                     "results": "grade/results/results.json", "format": "prairielearn",
                     "salt": "grade/serverFilesCourse/glassllm/salt",
                     "roster": "grade/serverFilesCourse/glassllm/roster.csv",
                     "identity": "grade/data/data.json"},
    "gradescope": {"exercise": "autograder/source", "submission": "autograder/submission",
                   "results": "autograder/results/results.json", "format": "gradescope",
                   "salt": "autograder/source/salt", "roster": "autograder/source/roster.csv",
                   "identity": "autograder/submission_metadata.json"},
}
SUBMITTED = (".py", ".ipynb", ".json")
MAX_IDENTITY_BYTES = 4 * 2**20      # Gradescope's metadata holds every previous result


def _json(path: Path) -> Any:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_IDENTITY_BYTES + 1)
    except OSError as exc:
        raise identity.IdentityError(f"{path.name}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_IDENTITY_BYTES:
        raise identity.IdentityError(f"{path.name}: larger than {MAX_IDENTITY_BYTES} bytes")
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except ValueError:
        raise identity.IdentityError(f"{path.name}: not JSON") from None


def student(platform: str, found: dict[str, Any], roster: identity.Roster | None,
            required: bool = True) -> str:
    """The student of `platform`'s identity file (`found["identity"]`, from `locate`),
    by the platform's rule of `identity` (a person's id must be on `roster` when
    `required`). Raises `identity.IdentityError`."""
    data = _json(Path(found["identity"]))
    rule = identity.prairielearn if platform == "prairielearn" else identity.gradescope
    return rule(data, roster, Path(found["identity"]).name, required)


def locate(platform: str, root: str | Path = "/") -> dict[str, Any]:
    """The paths of `platform`'s layout under `root`: ``exercise``, ``submission``,
    ``results``, ``format``, ``salt`` and ``roster`` (None where the file is not there),
    ``identity`` (the file that names the student). The exercise, salt and roster are
    made 0600 (where the grader may: as their owner)."""
    layout, root = PLATFORMS[platform], Path(root)
    tomls = sorted((root / layout["exercise"]).glob("*.toml"))
    folder = root / layout["submission"]
    found = sorted(p for p in folder.glob("*") if p.suffix in SUBMITTED and p.is_file()) \
        if folder.is_dir() else []
    out = {"exercise": tomls[0] if len(tomls) == 1 else root / layout["exercise"]
           / "exercise.toml",
           "submission": found[0] if found else folder / "submission.py",
           "results": root / layout["results"], "format": layout["format"],
           "identity": root / layout["identity"]}
    for name in ("salt", "roster"):
        path = root / layout[name]
        out[name] = path if path.is_file() else None
    for path in (out["exercise"], out["salt"], out["roster"]):
        if path is not None:
            with contextlib.suppress(OSError):     # not the owner: the image's job
                os.chmod(path, 0o600)
    return out
