"""Notebooks as students hand them in, for the otter and nbgrader tests: an honest one,
and one that tries every in-kernel cheat a student who has not read the grader would
try (docs/integrity.md#the-offline-grader-and-the-platforms)."""

from __future__ import annotations

import json

# Run in the grader's kernel, this would raise the grade of a check written as a cell
# (it patches what such a check calls); run in glassllm's child, it only hurts itself.
# It leaves a marker in MARKERS when it finds itself in a Jupyter kernel.
CHEAT = '''
import builtins, json, os, subprocess, sys
import numpy as np

if "ipykernel" in sys.modules:
    with open(os.path.join(MARKERS, "kernel"), "w") as f:
        f.write("the student's code ran in the grader's kernel")

FULL = {"score": 8.0, "max_score": 8.0, "tests": [], "passed": True}

class Done:
    returncode = 0
    stdout = json.dumps(FULL)
    stderr = ""

subprocess.run = lambda *a, **k: Done()
subprocess.check_output = lambda *a, **k: Done.stdout
_loads = json.loads

def loads(text, *a, **k):      # a report's score read back as full marks; the rest as is
    out = _loads(text, *a, **k)
    return dict(FULL) if isinstance(out, dict) and "score" in out else out

json.loads = loads
json.load = lambda f, *a, **k: loads(f.read(), *a, **k)
np.allclose = lambda *a, **k: True
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
builtins.AssertionError = type("AssertionError", (Exception,), {})
try:
    import otter.test_files
    otter.test_files.GradingResults.total = property(lambda self: self.possible)
    otter.test_files.abstract_test.TestFile.score = property(lambda self: self.possible)
except Exception:
    pass
for path in ("results.json", "../results/results.json", "/autograder/results/results.json"):
    try:
        with open(path, "w") as f:
            json.dump({"score": 8.0, "tests": [{"name": "q1", "score": 8, "max_score": 8}]}, f)
    except OSError:
        pass

def softmax_backward(x, g):
    return np.zeros_like(x)
'''


def cheat(markers) -> str:
    """The cheating cell, its markers left in the folder `markers`."""
    return CHEAT.replace("MARKERS", repr(str(markers)))


def marker_code(path) -> str:
    """Python that leaves a marker at `path` when it runs."""
    return f"with open({str(path)!r}, 'w') as f:\n    f.write('ran')\n"


def notebook(source: str, extra: list[dict] | None = None) -> dict:
    """A notebook: a title, a cell with IPython syntax, the student's `source`, then
    `extra` cells (an nbgrader grade cell)."""
    cells = [{"cell_type": "markdown", "id": "a", "metadata": {},
              "source": "# Softmax's backward"},
             {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None,
              "outputs": [],
              "source": "!echo a shell escape, not run by glassllm grade\nimport numpy as np"},
             {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": None,
              "outputs": [], "source": source}, *(extra or [])]
    return {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"},
                         "language_info": {"name": "python"}}}


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1)
