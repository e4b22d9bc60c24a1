"""``glassllm grade EXERCISE SUBMISSION``: the command line of the grader (docs/grading.md).

    glassllm grade course/rmsnorm-backward.toml submission.py --student ada \
        --format gradescope --results /autograder/results/results.json

Exit status 0 whenever the submission was graded, whatever its score (a syntax error, a
crash or a loop is a score of 0, with the reason, not a failure of the grader); 2 when the
exercise file or an option is wrong, 3 when the grader itself failed: the results file
then holds "not graded" (no test passed; PrairieLearn's ``gradable: false``) and why, so
a grader's platform still shows something. The results file is written last and
atomically, and is always complete. Which protections of the student's process are off
goes to stderr (the instructor's log), never into the results.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback

from glassllm.course.exercise import ExerciseFileError
from glassllm.course.grader import (
    DEFAULT_BUDGET,
    formats,
    grade_submission,
    lockdown,
    not_graded,
    runner,
    write_results,
)
from glassllm.course.grader.platforms import PLATFORMS, locate
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
    p.add_argument("--student", default="practice",
                   help="whose numbers (default %(default)r)")
    p.add_argument("--salt", default=None,
                   help="the course's salt (default: $GLASSLLM_COURSE_SALT, else the"
                        " practice salt); prefer the variable: a command line is visible"
                        " to other processes")
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


def run(args: argparse.Namespace) -> int:
    if args.prepare:
        return _prepare()
    if args.time_limit is None:
        try:
            args.time_limit = _seconds(os.environ.get("GLASSLLM_GRADE_SECONDS")
                                       or str(DEFAULT_BUDGET))
        except argparse.ArgumentTypeError as exc:
            args.subparser.error(f"GLASSLLM_GRADE_SECONDS {exc}")
    if args.platform is not None:
        found = locate(args.platform, args.root)
        args.exercise = args.exercise or found["exercise"]
        args.submission = args.submission or found["submission"]
        args.results = args.results or found["results"]
        args.format = found["format"]
        args.student = found["student"] if args.student == "practice" else args.student
        for path in lockdown.lock(args.platform, args.root, args.exercise):
            print(f"glassllm grade: could not close {path} to the student's user",
                  file=sys.stderr)
    elif args.exercise is None or args.submission is None:
        args.subparser.error("give EXERCISE and SUBMISSION, or --platform")
    with runner.cleanup_after():     # the results first, then what the child left
        return _grade(args)


def _grade(args: argparse.Namespace) -> int:
    try:
        report = grade_submission(args.exercise, args.submission, args.student, args.salt,
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
    if args.results is not None:
        print(report.summary(), file=sys.stderr)
    return 0
