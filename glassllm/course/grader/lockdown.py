"""A platform's folders closed to every user but the grader's before any student code
runs (docs/grading.md): PrairieLearn's ``/grade`` (the question's ``tests/`` with the
exercise file, ``serverFilesCourse/``, ``data/``, the student's files, the results) and
Gradescope's ``/autograder`` (``source/`` with the exercise and the wheels, the
submission's metadata, the results) become 0700, the exercise file 0600.

The job's container is the grader's alone (PrairieLearn and Gradescope start one per
submission, as root), so closing them changes nothing for anyone else; the student's
code, which runs as a user of its own and gets its task in its own directory, then
cannot read or write anything there, even where it could see this file system.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TOPS", "lock"]

TOPS = {"prairielearn": "grade", "gradescope": "autograder"}


def lock(platform: str, root: str | Path, exercise: str | Path) -> list[str]:
    """Close `platform`'s folder under `root` (0700) and the exercise file (0600), never
    through a symbolic link; the paths it could not close (not the grader's), for the
    log."""
    missed = []
    for path, mode in ((Path(root) / TOPS[platform], 0o700), (Path(exercise), 0o600)):
        try:
            if path.is_symlink():
                raise OSError(f"{path} is a symbolic link")
            os.chmod(path, mode)
        except FileNotFoundError:
            continue
        except OSError:
            missed.append(str(path))
    return missed
