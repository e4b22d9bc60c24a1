"""The repository's habits, checked so they stay true: a line budget per Python module (as
tinygrad's CI keeps one), the book first in ``glassllm/``, and comments that say why.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from paths import ROOT

BUDGET = 600                                   # lines of one Python module
OVER_BUDGET = {"glassllm/autograd.py"}         # the op catalogue: one op after another
ENTRIES = 16                                   # of glassllm/: the book, then five folders


def tracked() -> list[str]:
    """The repository's files (git's list; a tree without .git: every file but the
    ignored kinds)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
        return [f for f in out if (ROOT / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".venv", ".git", ".tools", "mutants", "test-artifacts", "__pycache__", "build",
                "dist", ".pytest_cache", ".ruff_cache", ".hypothesis"}
        return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]


@pytest.mark.parametrize("path", [f for f in tracked() if f.endswith(".py")])
def test_every_python_module_keeps_to_the_line_budget(path):
    lines = (ROOT / path).read_text(encoding="utf-8").count("\n")
    if path in OVER_BUDGET:
        return
    assert lines <= BUDGET, f"{path}: {lines} lines; split it by what it holds"


def test_the_book_comes_first_in_at_most_16_entries():
    entries = sorted(p.name for p in (ROOT / "glassllm").iterdir() if p.name != "__pycache__")
    assert len(entries) <= ENTRIES, entries
    book = {"tensor.py", "grad_mode.py", "autograd.py", "shapes.py", "layers.py", "modules.py",
            "optim.py", "gradients", "tokenizer.py", "errors.py"}
    assert book <= set(entries)
    assert {e for e in entries if not e.endswith(".py")} <= {"gradients", "fast", "sandbox",
                                                             "training", "course", "apps"}


TRACKER = re.compile(r"issues? #?[0-9]+", re.IGNORECASE)
READ = (".py", ".md", ".js", ".css", ".html", ".json", ".toml", ".yaml", ".yml", ".sh",
        ".txt", "Makefile", "Dockerfile", "run")


def test_no_comment_or_doc_cites_a_tracker_the_reader_cannot_see():
    """Say why, never a tracker's number: the repository has no issue list."""
    found = []
    for path in tracked():
        vendored = path.startswith(("static/vendor/", "tests/vendor/"))
        if not path.endswith(READ) or (vendored and not path.endswith("README.md")):
            continue                      # another project's files, not our words
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        found += [f"{path}: {m.group(0)}" for m in TRACKER.finditer(text)]
    assert found == []
