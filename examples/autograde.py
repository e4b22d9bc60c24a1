"""Grade a hand-written softmax backward, offline: a thin example over `glassllm grade`.

    python examples/autograde.py --submission examples/student_softmax.py \\
        --results results.json [--format gradescope] [--student ID]

The exercise is `examples/softmax-backward.toml`: ``softmax_backward(x, g) -> dx`` run on
the student's own numbers and on four edge cases. The same as

    glassllm grade examples/softmax-backward.toml SUBMISSION --format gradescope \\
        --practice --results results.json

No server and no network: the submission runs in a limited child process, each case is
compared per element with glassllm's own gradient to 6 significant digits, and a wrong
case names its mistake, never with the expected numbers (the exercise hides them). The
results file (Gradescope's ``results.json`` by default; ``prairielearn``, ``json`` and
``text`` too) is always written, complete; exit status 0 whenever grading ran, whatever
the score (docs/grading.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glassllm.course.grader import formats, grade_submission, write_results

EXERCISE = Path(__file__).with_name("softmax-backward.toml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submission", required=True, help="a .py or .ipynb file")
    parser.add_argument("--results", required=True, help="where the results go")
    parser.add_argument("--format", choices=sorted(formats.FORMATS), default="gradescope")
    parser.add_argument("--student", default="practice", help="whose numbers")
    args = parser.parse_args(argv)
    report = grade_submission(EXERCISE, args.submission, args.student)
    write_results(formats.render(report, args.format), args.results)
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
