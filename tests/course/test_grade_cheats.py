"""Cheats score nothing for the cheat: each submission below tries one way around the
grader and returns the right answer only if that way worked (else zeros). The grader runs
as a course's grader does, `glassllm grade ... --results FILE` in a process of its own,
with the exercise file at mode 0600 and the salt in its environment (docs/grading.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glassllm.course.exercise import SHIPPED
from glassllm.course.grader import runner

SALT = "s3cret-course-salt"
HEAD = '''
import json, os, sys
import numpy as np

def parent_args():
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\\0") if a]

def results_path():
    args = parent_args()
    return args[args.index("--results") + 1]

def zeros(x, weight, g):
    return np.zeros_like(x), np.zeros_like(weight)
'''
CHEATS = {
    "reading the exercise file": '''
def rms_norm_backward(x, weight, g):
    path = next(a for a in parent_args() if a.endswith(".toml"))
    try:
        text = open(path).read()
        print("read the exercise file:", len(text), "characters")
    except OSError as exc:
        print("the exercise file: denied", type(exc).__name__)
    return zeros(x, weight, g)
''',
    "reading the parent's /proc": '''
def rms_norm_backward(x, weight, g):
    for name in ("environ", "cwd", "fd", "maps"):
        try:
            p = f"/proc/{os.getppid()}/{name}"
            found = os.listdir(p) if name == "fd" else os.readlink(p) if name == "cwd" \\
                else open(p, "rb").read()
            print(name, "read:", found)
        except OSError as exc:
            print(name, "denied", type(exc).__name__)
    return zeros(x, weight, g)
''',
    "import glassllm to call backward": '''
import glassllm
def rms_norm_backward(x, weight, g):
    return zeros(x, weight, g)
''',
    "printing a fake results JSON": '''
print(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
def rms_norm_backward(x, weight, g):
    print(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
    return zeros(x, weight, g)
''',
    "writing the results file": '''
def rms_norm_backward(x, weight, g):
    try:
        with open(results_path(), "w") as f:
            f.write(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
        print("wrote the results")
    except OSError as exc:
        print("the results file: denied", type(exc).__name__)
    return zeros(x, weight, g)
''',
    "sys.exit(0) early": '''
sys.exit(0)
''',
    "os._exit(0) early": '''
os._exit(0)
''',
    "monkeypatching NumPy's comparisons": '''
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.shape(a), bool)
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
def rms_norm_backward(x, weight, g):
    return zeros(x, weight, g)
''',
    "a forked daemon rewriting the results after the grader": '''
def rms_norm_backward(x, weight, g):
    target = results_path()
    try:
        pid = os.fork()
    except OSError as exc:
        print("fork denied", type(exc).__name__)
        return zeros(x, weight, g)
    if pid == 0:
        os.setsid()
        import time
        time.sleep(1.0)
        with open(target, "w") as f:
            f.write(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
        os._exit(0)
    return zeros(x, weight, g)
''',
}


@pytest.fixture(scope="module")
def grader_dir(tmp_path_factory):
    """The grader's files as a course's image holds them: the exercise at 0600, the
    results folder not writable by the student's user."""
    home = tmp_path_factory.mktemp("grader")
    home.chmod(0o700)
    exercise = home / "exercise.toml"
    shutil.copyfile(SHIPPED / "rmsnorm-backward.toml", exercise)
    exercise.chmod(0o600)
    return home


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_cheat_scores_nothing(grader_dir, tmp_path, cheat):
    sub = tmp_path / "submission.py"
    sub.write_text(HEAD + CHEATS[cheat])
    sub.chmod(0o644)
    results = grader_dir / f"results-{len(cheat)}-{cheat[:4]}" / "results.json"
    env = {**os.environ, "GLASSLLM_COURSE_SALT": SALT}
    done = subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade",
                           str(grader_dir / "exercise.toml"), str(sub), "--student", "ada",
                           "--format", "json", "--results", str(results),
                           "--time-limit", "10"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    if "daemon" in cheat:
        time.sleep(1.5)                 # the daemon's write would have come by now
    text = results.read_text()
    report = json.loads(text)
    assert report["exercise"] == "rmsnorm-backward" and len(report["tests"]) == 3
    assert (report["score"], report["max_score"]) == (0.0, 10.0)
    assert SALT not in text and str(grader_dir) not in text
    said = "\n".join(t["output"] + t["message"] for t in report["tests"])
    separate = runner.isolation().user is not None
    if cheat == "reading the exercise file" and separate:
        assert "the exercise file: denied PermissionError" in said
    if cheat == "reading the parent's /proc":
        assert "environ denied PermissionError" in said and "fd denied" in said
    if cheat == "writing the results file" and separate:
        assert "the results file: denied PermissionError" in said
    if "daemon" in cheat:
        assert "fork denied BlockingIOError" in said
    if cheat == "import glassllm to call backward":
        assert "No module named 'glassllm'" in said
    if "early" in cheat:
        assert all(t["message"].startswith("0 points: ") for t in report["tests"])


def test_the_child_has_only_numpy_and_no_setting_of_the_grader(tmp_path, monkeypatch):
    from glassllm.course.grader import grade_submission

    monkeypatch.setenv("GLASSLLM_COURSE_SALT", SALT)
    sub = tmp_path / "probe.py"
    sub.write_text(HEAD + '''
import importlib.util, resource
def rms_norm_backward(x, weight, g):
    print("env", sorted(os.environ))
    print("cwd", sorted(os.listdir(".")))
    print("mods", [m for m in ("torch", "glassllm", "pytest", "fastapi", "jsonschema")
                   if importlib.util.find_spec(m)])
    print("limits", [resource.getrlimit(getattr(resource, "RLIMIT_" + n))[1]
                     for n in ("NPROC", "NOFILE")])
    print("uid", os.getuid(), os.geteuid())
    return zeros(x, weight, g)
''')
    report = grade_submission(SHIPPED / "rmsnorm-backward.toml", sub, "ada", budget=10)
    out = report.tests[0].output
    assert "env ['HOME', 'LANG', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS', " \
           "'OPENBLAS_NUM_THREADS', 'PATH']" in out
    assert "cwd ['answers', 'harness.py', 'inputs.npz', 'task.json']" in out
    assert "mods []" in out and "limits [0, 64]" in out
    assert SALT not in out
    if runner.isolation().user is not None:
        assert f"uid {runner.NOBODY} {runner.NOBODY}" in out
    assert Path(runner._numpy_dir()).stat().st_mode & 0o777 == 0o755
