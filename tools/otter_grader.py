"""otter-grader, the real one from PyPI, in a venv of its own, for the tests that run
`otter run` (no Docker) on notebooks graded by glassllm's otter plugin.

    python tools/otter_grader.py install     # make test runs this (needs the network once)

- otter-grader, pinned `OTTER_GRADER`, and ipykernel, pinned `IPYKERNEL` (the kernel
  `otter run` starts), in ``.tools/otter``: none of otter's many dependencies (pandas,
  nbconvert, ...) leaks into glassllm's environment;
- glassllm itself as this checkout, through a ``.pth`` file (NumPy is otter's own), as a
  course's otter image installs glassllm beside otter: otter imports the plugin
  ``glassllm.course.grader.otter_plugin.GlassllmGrade``, which runs ``glassllm grade``
  with otter's Python.

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
VERSION = f"otter-grader=={OTTER_GRADER} ipykernel=={IPYKERNEL} glassllm-pth"


def _pth() -> Path:
    site = next(VENV.glob("lib/python3*/site-packages"))
    return site / "glassllm-checkout.pth"


def ready() -> bool:
    return (OTTER.exists() and STAMP.exists() and STAMP.read_text() == VERSION
            and _pth().exists() and _pth().read_text().strip() == str(ROOT))


def install() -> None:
    """otter-grader and ipykernel at their pinned versions, and this checkout on otter's
    path (a no-op when they are there)."""
    if ready():
        return
    if not (OTTER.exists() and STAMP.exists() and STAMP.read_text().startswith(
            f"otter-grader=={OTTER_GRADER} ipykernel=={IPYKERNEL}")):
        venv.create(VENV, with_pip=True, clear=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet",
                        f"otter-grader=={OTTER_GRADER}", f"ipykernel=={IPYKERNEL}"],
                       check=True)
    _pth().write_text(f"{ROOT}\n")
    STAMP.write_text(VERSION)


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        print(__doc__)
        sys.exit(2)
    install()
