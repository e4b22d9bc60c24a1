"""nbgrader, the real one from PyPI, in a venv of its own, for the test that runs
nbgrader's ``autograde`` on a course directory with its gradebook, through glassllm's
preprocessors (docs/grading.md#nbgrader).

    python tools/nbgrader_grader.py install     # make test runs this (needs the network once)

- nbgrader, pinned `NBGRADER`, and ipykernel, pinned `IPYKERNEL` (the kernel nbgrader's
  ``Execute`` starts), in ``.tools/nbgrader``: none of its dependencies (jupyter_server,
  nbconvert, SQLAlchemy 2, ...) leaks into glassllm's environment;
- glassllm itself as this checkout, through a ``.pth`` file (NumPy is installed beside
  it, as a course's nbgrader image would have it): nbgrader's config imports
  ``glassllm.course.grader.nbgrader_plugin``, which runs ``glassllm grade`` with
  nbgrader's Python.

``.tools/`` is ignored by git.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBGRADER = "0.9.6"
IPYKERNEL = "7.4.0"
NUMPY = "2.4.6"                 # glassllm's own pin (requirements/service.lock)
VENV = ROOT / ".tools" / "nbgrader"
PYTHON = VENV / "bin" / "python"
NBGRADER_BIN = VENV / "bin" / "nbgrader"
STAMP = VENV / ".installed-version"
PACKAGES = f"nbgrader=={NBGRADER} ipykernel=={IPYKERNEL} numpy=={NUMPY}"
VERSION = f"{PACKAGES} glassllm-pth"


def _pth() -> Path:
    site = next(VENV.glob("lib/python3*/site-packages"))
    return site / "glassllm-checkout.pth"


def ready() -> bool:
    return (NBGRADER_BIN.exists() and STAMP.exists() and STAMP.read_text() == VERSION
            and _pth().exists() and _pth().read_text().strip() == str(ROOT))


def install() -> None:
    """nbgrader, ipykernel and NumPy at their pinned versions, and this checkout on
    nbgrader's path (a no-op when they are there)."""
    if ready():
        return
    if not (NBGRADER_BIN.exists() and STAMP.exists()
            and STAMP.read_text().startswith(PACKAGES)):
        venv.create(VENV, with_pip=True, clear=True)
        subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", *PACKAGES.split()],
                       check=True)
    _pth().write_text(f"{ROOT}\n")
    STAMP.write_text(VERSION)


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        print(__doc__)
        sys.exit(2)
    install()
