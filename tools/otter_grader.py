"""otter-grader, the real one from PyPI, in a venv of its own, for the test that runs
`otter run` (no Docker) on a sample notebook graded by `glassllm grade`.

    python tools/otter_grader.py install     # make test runs this (needs the network once)

- otter-grader, pinned `OTTER_GRADER`, and ipykernel, pinned `IPYKERNEL` (the kernel
  `otter run` executes the notebook in), in ``.tools/otter``: none of otter's many
  dependencies (pandas, nbconvert, ...) leaks into glassllm's environment;
- not glassllm: the autograder's test calls ``glassllm grade`` with glassllm's own
  environment's Python, named in the test file, as a course's grading image calls its
  installed ``glassllm``.

``.tools/`` is ignored by git.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OTTER_GRADER = "7.0.0"
IPYKERNEL = "7.4.0"
VENV = ROOT / ".tools" / "otter"
PYTHON = VENV / "bin" / "python"
OTTER = VENV / "bin" / "otter"
STAMP = VENV / ".installed-version"
VERSION = f"otter-grader=={OTTER_GRADER} ipykernel=={IPYKERNEL}"


def ready() -> bool:
    return OTTER.exists() and STAMP.exists() and STAMP.read_text() == VERSION


def install() -> None:
    """otter-grader and ipykernel at their pinned versions (a no-op when they are there)."""
    if ready():
        return
    venv.create(VENV, with_pip=True, clear=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet",
                    f"otter-grader=={OTTER_GRADER}", f"ipykernel=={IPYKERNEL}"], check=True)
    STAMP.write_text(VERSION)


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        print(__doc__)
        sys.exit(2)
    install()
