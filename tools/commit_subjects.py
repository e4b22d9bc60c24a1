"""Every commit after the recorded base (``.ci/commit-base``, one hash) reads as the house
asks (docs/testing.md#commits): a subject of at most 72 characters, then a blank line and a
body saying why. A merge commit needs the subject only (its body is the branch it joins).

    python tools/commit_subjects.py [--base REV]     (make commits; CI's "commits" stage)

Exits 1 naming each commit that breaks a rule, and the rule; 2 when the base is not in
this clone's full history (a shallow clone without it checks the commits it holds, saying
so). Stdlib only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_FILE = ROOT / ".ci" / "commit-base"
MAX_SUBJECT = 72


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout


def problems(commit: str, parents: int, message: str) -> list[str]:
    """What is wrong with one commit's message: [] when nothing is."""
    subject, _, rest = message.partition("\n")
    out = []
    if not subject.strip():
        out.append("an empty subject")
    if len(subject) > MAX_SUBJECT:
        out.append(f"a subject of {len(subject)} characters (at most {MAX_SUBJECT})")
    if parents < 2:
        if rest and not rest.startswith("\n"):
            out.append("no blank line after the subject")
        if not rest.strip():
            out.append("no body saying why")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help=f"the last commit not checked (default: {BASE_FILE.name})")
    args = parser.parse_args(argv)
    base = args.base or BASE_FILE.read_text(encoding="utf-8").split()[0]
    try:
        git("cat-file", "-e", f"{base}^{{commit}}")
        span = f"{base}..HEAD"
    except subprocess.CalledProcessError:
        if git("rev-parse", "--is-shallow-repository").strip() != "true":
            print(f"commit_subjects: base {base} is not in this clone's history",
                  file=sys.stderr)
            return 2
        # a shallow clone holds the newest commits only: those are checked, and it says so
        print(f"commit_subjects: a shallow clone without the base {base[:12]}: checking the"
              " commits it holds", file=sys.stderr)
        span = "HEAD"
    log = git("log", "--format=%H %P%x1f%B%x1e", span)
    bad = 0
    checked = 0
    for record in filter(str.strip, log.split("\x1e")):
        head, _, message = record.strip("\n").partition("\x1f")
        commit, *parents = head.split()
        checked += 1
        for problem in problems(commit, len(parents), message):
            bad += 1
            print(f"{commit[:12]} {message.partition(chr(10))[0][:60]!r}: {problem}")
    print(f"commit_subjects: {checked} commits after {base[:12]}, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
