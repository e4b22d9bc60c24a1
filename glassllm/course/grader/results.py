"""What `glassllm grade` found: one `TestResult` per case (or per answer of a value /
gradient exercise), and the `Report` of a submission, from which every format is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from glassllm.course.verdict import Verdict

__all__ = ["Report", "TestResult", "verdict_table"]

ROWS, COLUMNS = 16, 12             # the largest grid a verdict table shows


@dataclass
class TestResult:
    """One graded test: a case of a function (its returns), or one claimed array."""

    name: str
    max_score: float
    score: float = 0.0
    message: str = ""              # the verdict in words (the mistake's pattern)
    table: str = ""                # the per-element verdict table(s), plain text
    output: str = ""               # the student's own printed output for this case
    verdicts: dict[str, dict] = field(default_factory=dict)   # answer -> Verdict.public
    heatmap: bytes | None = None   # PNG: where the wrong elements are

    @property
    def passed(self) -> bool:
        """Every point earned, of a test that has points: a test worth nothing (a
        "not graded" notice) never passes."""
        return self.max_score > 0 and self.score >= self.max_score - 1e-6


@dataclass
class Report:
    """A graded submission: every test, always (a test that could not run scores 0 and
    says why), and which protections of the student's process were off (for the
    instructor's log: no format shows them to the student). ``graded`` is False when the
    grader could not grade (a broken exercise file, a failure of the grader): its one
    test is worth nothing and passes nothing."""

    exercise: str
    title: str
    student: str
    tests: list[TestResult]
    protections_off: tuple[str, ...] = ()
    seconds: float = 0.0
    feedback: str = "digits+pattern"
    graded: bool = True

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 6)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 6)

    def summary(self) -> str:
        if not self.graded:
            return f"{self.exercise}: not graded"
        right = sum(t.passed for t in self.tests)
        return (f"{self.exercise}: {self.score:g} / {self.max_score:g} points"
                f" ({right} of {len(self.tests)} tests right)")


def verdict_table(name: str, verdict: Verdict, feedback: str, reveal: bool) -> str:
    """A small per-element table of one answer at `feedback`: the digits each element
    agrees to (``digits+pattern``), or ✓ / ✗ (``pattern``); leading axes flattened into
    rows, at most `ROWS` × `COLUMNS` shown. The expected numbers only with `reveal`."""
    if feedback == "pass/fail":
        return f"{name}: {'right' if verdict.passed else 'wrong'}"
    if verdict.agree is None:
        return (f"{name}: shape {tuple(verdict.claimed.shape)}, expected shape"
                f" {tuple(verdict.expected.shape)}: no element compared")
    agree = np.atleast_2d(verdict.agree.reshape(-1, verdict.agree.shape[-1])
                          if verdict.agree.ndim else verdict.agree)
    digits = None if verdict.digits is None else np.atleast_2d(
        verdict.digits.reshape(agree.shape))
    head = (f"{name}: {int(verdict.agree.sum())} of {verdict.agree.size} elements right"
            + (" (digits agreed; ✗ wrong)" if feedback == "digits+pattern" else ""))
    lines = [head]
    for i, row in enumerate(agree[:ROWS]):
        cells = []
        for j, ok in enumerate(row[:COLUMNS]):
            if feedback == "digits+pattern" and digits is not None:
                d = digits[i, j]
                cell = "∞" if np.isinf(d) else str(int(d))
                cells.append(f"{cell:>3}{' ' if ok else '✗'}")
            else:
                cells.append(" ✓" if ok else " ✗")
        more = " …" if agree.shape[1] > COLUMNS else ""
        lines.append(f"  [{i:>2}]" + "".join(cells) + more)
    if agree.shape[0] > ROWS:
        lines.append(f"  … {agree.shape[0] - ROWS} more rows")
    if reveal:
        lines.append("  expected: " + np.array2string(verdict.expected, precision=6,
                                                      threshold=64))
    return "\n".join(lines)
