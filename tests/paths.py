"""Where things are, for every test folder: the repository, its test data."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
REFERENCE = TESTS / "reference"   # numbers of independent references (PyTorch, the SPEC)
SNAPSHOTS = TESTS / "snapshots"
