"""``glassllm grade EXERCISE SUBMISSION``: the command line of the grader (docs/grading.md).

    glassllm grade course/rmsnorm-backward.toml submission.py --student ada \
        --roster students.csv --salt-file /run/secrets/course-salt \
        --format gradescope --results /autograder/results/results.json

Exit status 0 whenever the submission was graded, whatever its score (a syntax error, a
crash or a loop is a score of 0, with the reason, not a failure of the grader); 2 when the
exercise file or an option is wrong, when the salt is missing for a platform's format
(`salt`), or when the student cannot be named for sure (`identity`); 3 when the grader
itself failed. The results file then holds "not graded" (no test passed; PrairieLearn's
``gradable: false``) and why, so a grader's platform still shows something, and stderr
(the instructor's log) says what to fix in one line. The results file is written last
and atomically, and is always complete. Which protections of the student's process are
off goes to stderr, never into the results.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback
import unicodedata
from pathlib import Path

from glassllm.course.exercise import ExerciseFileError
from glassllm.course.grader import (
    DEFAULT_BUDGET,
    formats,
    grade_submission,
    identity,
    lockdown,
    not_graded,
    platforms,
    runner,
    write_results,
)
from glassllm.course.grader.platforms import PLATFORMS, locate
from glassllm.course.grader.salt import PLATFORM_FORMATS, SaltError, course_salt
from glassllm.course.verdict import FEEDBACK

__all__ = ["add_parser", "run"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.5 <= value <= 3600):
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0.5 to 3600,"
                                         f" got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("grade", help="grade a submission offline (docs/grading.md)")
    p.set_defaults(subparser=p)
    p.add_argument("exercise", metavar="EXERCISE", nargs="?",
                   help="the exercise's TOML file (or a mystery's: kind = \"mystery\")")
    p.add_argument("submission", metavar="SUBMISSION", nargs="?",
                   help="a .py or .ipynb defining the exercise's function, or a .json of"
                        " claimed arrays; for a mystery, a .json proof {node, variables}")
    p.add_argument("--platform", choices=sorted(PLATFORMS), default=None,
                   help="take the exercise, the submission, the student and the results"
                        " file from this platform's layout (PrairieLearn's /grade,"
                        " Gradescope's /autograder)")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)   # tests: a fake "/"
    p.add_argument("--student", default=None,
                   help="whose numbers: looked up on --roster when given (default: the"
                        " platform's user with --platform, else 'practice')")
    p.add_argument("--roster", default=None, metavar="FILE",
                   help="the course's roster (the CSV glassllm-sandbox roster enrols, or"
                        " the gradebook's CSV or JSON): the student must be on it")
    p.add_argument("--salt-file", default=None, metavar="FILE",
                   help="a file holding the course's salt, readable by the grader only"
                        " (default: $GLASSLLM_COURSE_SALT_FILE, $GLASSLLM_COURSE_SALT,"
                        " the platform's file)")
    p.add_argument("--salt", default=None, help=argparse.SUPPRESS)   # refused: /proc
    p.add_argument("--practice", action="store_true",
                   help="grade with the practice salt and no roster on purpose (a"
                        " platform's format refuses the practice salt without it)")
    p.add_argument("--format", choices=sorted(formats.FORMATS), default="text",
                   help="the results' format (default %(default)s)")
    p.add_argument("--results", default=None,
                   help="write the results to this file, atomically (default: stdout)")
    p.add_argument("--time-limit", type=_seconds, default=None,
                   help="seconds for the student's code in all (default:"
                        f" $GLASSLLM_GRADE_SECONDS, else {DEFAULT_BUDGET:g})")
    p.add_argument("--feedback", choices=FEEDBACK, default=None,
                   help="what a wrong answer is told (default: the exercise's)")
    p.add_argument("--prepare", action="store_true",
                   help="make the student's private Python now (once per interpreter and"
                        " NumPy; an image does it when it is built), say which"
                        " protections are on, and exit")


def _emit(text: str, results: str | None) -> None:
    if results is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_results(text, results)


def _prepare() -> int:
    iso = runner.isolation()
    where = iso.jail.root if iso.jail is not None else "none"
    print(f"glassllm grade: the student's private Python: {where}")
    for off in iso.off:
        print(f"glassllm grade: off: {off}")
    return 0 if iso.jail is not None else 1


def _not_set_up(args: argparse.Namespace, why: str, shown: str) -> int:
    """One line for the instructor (stderr), "not graded" results for the platform."""
    print(f"error: {why}", file=sys.stderr)
    _emit(not_graded(f"not graded: {shown} (for the course's staff to fix)", args.format),
          args.results)
    return 2


def _who(args: argparse.Namespace, found: dict | None) -> str:
    """The student, by the documented rule (`identity`); raises IdentityError."""
    roster_file = args.roster or (found or {}).get("roster")
    roster = identity.load_roster(roster_file) if roster_file else None
    if args.student is not None:
        if roster is not None:
            return identity.resolve([("--student", args.student)], roster, "--student")
        return unicodedata.normalize("NFC", args.student.strip())
    if found is not None:
        return platforms.student(args.platform, found, roster, required=not args.practice)
    if args.format in PLATFORM_FORMATS and not args.practice:
        raise identity.IdentityError(f"--format {args.format} needs the student: give"
                                     " --student ID (or --platform), or --practice")
    return "practice"


def run(args: argparse.Namespace) -> int:
    if args.prepare:
        return _prepare()
    if args.time_limit is None:
        try:
            args.time_limit = _seconds(os.environ.get("GLASSLLM_GRADE_SECONDS")
                                       or str(DEFAULT_BUDGET))
        except argparse.ArgumentTypeError as exc:
            args.subparser.error(f"GLASSLLM_GRADE_SECONDS {exc}")
    if args.salt is not None:
        args.subparser.error("--salt is not taken: a command line is readable by every"
                             " process (/proc/PID/cmdline); put the salt in a file only the"
                             " grader's user reads and give --salt-file FILE")
    found = None
    if args.platform is not None:
        found = locate(args.platform, args.root)
        args.exercise = args.exercise or found["exercise"]
        args.submission = args.submission or found["submission"]
        args.results = args.results or found["results"]
        args.format = found["format"]
        for path in lockdown.lock(args.platform, args.root, args.exercise):
            print(f"glassllm grade: could not close {path} to the student's user",
                  file=sys.stderr)
    elif args.exercise is None or args.submission is None:
        args.subparser.error("give EXERCISE and SUBMISSION, or --platform")
    with runner.cleanup_after():     # the results first, then what the child left
        return _grade(args, found)


def _grade(args: argparse.Namespace, found: dict | None) -> int:
    try:
        salt = course_salt(args.format, args.salt_file, args.practice,
                           Path(args.root) / PLATFORMS[args.platform]["salt"]
                           if args.platform else None)
    except SaltError as exc:
        return _not_set_up(args, str(exc), "the grader has no course salt")
    try:
        student = _who(args, found)
    except identity.IdentityError as exc:
        return _not_set_up(args, str(exc), f"the student cannot be named: {exc}")
    for line in salt.warnings:
        print(f"warning: {line}", file=sys.stderr)
    try:
        report = grade_submission(args.exercise, args.submission, student, salt.value,
                                  args.time_limit, args.feedback)
    except (ExerciseFileError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        _emit(not_graded("not graded: the exercise file is not valid (for the course's"
                         " staff to fix; not a problem with the submission)", args.format),
              args.results)
        return 2
    except Exception:                        # the grader's own failure: never a score
        traceback.print_exc(file=sys.stderr)
        _emit(not_graded("not graded: the grader failed (its fault, not the submission's;"
                         " the course's staff can regrade it)", args.format), args.results)
        return 3
    _emit(formats.render(report, args.format), args.results)
    if report.protections_off:
        print(formats.protections_log(report), file=sys.stderr)
    # the instructor's log, whether the results go to a file or to stdout
    print(f"{report.summary()}; student {student!r}, salt: {salt.source}", file=sys.stderr)
    return 0
