"""Where `glassllm grade` takes the course's salt from, never silently
(docs/grading.md#the-courses-salt).

In order: ``--salt-file FILE``, then ``$GLASSLLM_COURSE_SALT_FILE``, then
``$GLASSLLM_COURSE_SALT``, then the platform's own file (``--platform``). None of them,
or one that holds the practice salt, is the practice salt: allowed for ``text`` and
``json`` (said on stderr), refused for a platform's format unless ``--practice``.
A salt file is read bounded (4 KiB), as UTF-8 with its BOM and line end dropped; one that
others may read is said on stderr. No salt ever reaches the student's process: its
environment is built from nothing (docs/grading.md#student-code-never-harms-the-grade).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from glassllm.course.cases import DEFAULT_SALT

__all__ = ["MAX_SALT_BYTES", "PLATFORM_FORMATS", "CourseSalt", "SaltError", "course_salt",
           "read_salt_file"]

MAX_SALT_BYTES = 4096
PLATFORM_FORMATS = frozenset({"gradescope", "prairielearn", "otter", "nbgrader"})


class SaltError(ValueError):
    """No usable course salt: a file that cannot be read or is empty, the practice salt
    for a platform's format without ``--practice``, or ``--practice`` with a salt."""


@dataclass(frozen=True)
class CourseSalt:
    value: str
    source: str                    # where it came from, for the instructor's log
    practice: bool
    warnings: tuple[str, ...] = ()


def read_salt_file(path: str | Path) -> tuple[str, tuple[str, ...]]:
    """The salt in `path` (UTF-8, at most `MAX_SALT_BYTES`; a BOM, surrounding spaces
    and the line end dropped) and the warnings to log (a file others may read). Raises
    `SaltError` naming the file: unreadable, too large, not UTF-8, or empty."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            raw = f.read(MAX_SALT_BYTES + 1)
    except OSError as exc:
        raise SaltError(f"salt file {path}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_SALT_BYTES:
        raise SaltError(f"salt file {path}: larger than {MAX_SALT_BYTES} bytes; it holds"
                        " the salt alone")
    try:
        value = raw.decode("utf-8-sig").strip()
    except UnicodeDecodeError as exc:
        raise SaltError(f"salt file {path}: not UTF-8 (byte {exc.start})") from None
    if not value:
        raise SaltError(f"salt file {path}: empty")
    warnings = ()
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warnings = (f"salt file {path} is readable by other users (mode"
                    f" {stat.S_IMODE(mode):04o}): make it 0600",)
    return value, warnings


def course_salt(fmt: str, salt_file: str | None = None, practice: bool = False,
                platform_file: str | Path | None = None,
                env: os._Environ | dict | None = None) -> CourseSalt:
    """The salt to grade with for results in format `fmt` (see the module's order).
    Raises `SaltError` with one line naming the flag and the settings: the practice salt
    for a format of `PLATFORM_FORMATS` without `practice`, or `practice` with a salt."""
    env = os.environ if env is None else env
    found: tuple[str, str, tuple[str, ...]] | None = None
    if salt_file:
        value, warnings = read_salt_file(salt_file)
        found = (value, f"--salt-file {salt_file}", warnings)
    elif env.get("GLASSLLM_COURSE_SALT_FILE"):
        path = env["GLASSLLM_COURSE_SALT_FILE"]
        value, warnings = read_salt_file(path)
        found = (value, f"GLASSLLM_COURSE_SALT_FILE={path}", warnings)
    elif env.get("GLASSLLM_COURSE_SALT"):
        found = (env["GLASSLLM_COURSE_SALT"], "GLASSLLM_COURSE_SALT", ())
    elif platform_file is not None and Path(platform_file).is_file():
        value, warnings = read_salt_file(platform_file)
        found = (value, f"the platform's salt file {platform_file}", warnings)
    if found is not None and found[0] != DEFAULT_SALT:
        if practice:
            raise SaltError(f"--practice with a course salt (from {found[1]}): grade with"
                            " one or the other")
        return CourseSalt(found[0], found[1], False, found[2])
    source = "the practice salt" + (f" (the value of {found[1]})" if found else "")
    if fmt in PLATFORM_FORMATS and not practice:
        where = f" or the platform's file {platform_file}" if platform_file else ""
        raise SaltError(f"--format {fmt} with {source}: every student's numbers would be"
                        " the public practice ones; give the course's salt with --salt-file"
                        f" FILE (or GLASSLLM_COURSE_SALT_FILE, GLASSLLM_COURSE_SALT{where}),"
                        " or --practice to grade practice work on purpose")
    warnings = () if practice else (f"grading with {source}: no --salt-file,"
                                    " GLASSLLM_COURSE_SALT_FILE nor GLASSLLM_COURSE_SALT",)
    return CourseSalt(DEFAULT_SALT, source, True, warnings)
