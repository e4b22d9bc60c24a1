"""`glassllm grade` of a student's function: run in a fresh, limited child process, every
failure kind of student code costs its case with a clear message, the results are always
complete and never show the grader's paths (docs/grading.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from glassllm.apps.cli import main
from glassllm.course.exercise import SHIPPED
from glassllm.course.grader import formats, grade_submission, runner

RMS = SHIPPED / "rmsnorm-backward.toml"
RIGHT = '''
import numpy as np

def rms_norm_backward(x, weight, g):
    d = x.shape[-1]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    dweight = np.sum(g * x * r, axis=tuple(range(x.ndim - 1)))
    gw = g * weight
    dx = gw * r - x * r**3 * np.sum(gw * x, axis=-1, keepdims=True) / d
    return dx, dweight
'''


def grade(tmp_path, source, name="submission.py", budget=10.0, **kw):
    path = tmp_path / name
    path.write_text(source)
    return grade_submission(RMS, path, "ada", budget=budget, **kw)


def assert_complete(report, tmp_path=None):
    assert [t.name for t in report.tests] == ["generated", "a row of zeros", "a large row"]
    assert report.max_score == 10.0
    for fmt in formats.FORMATS:
        text = formats.render(report, fmt)
        for secret in (str(Path(runner.__file__).parent), sys.prefix, "/tmp/glassllm-"):
            assert secret not in text
        if tmp_path is not None:
            assert str(tmp_path) not in text


def test_a_right_function_scores_every_point_and_its_prints_are_kept(tmp_path):
    report = grade(tmp_path, RIGHT.replace("    return dx", "    print('row', d)\n    return dx"))
    assert (report.score, report.max_score) == (10.0, 10.0)
    assert [t.output.strip() for t in report.tests] == ["row 8", "row 4", "row 4"]
    assert_complete(report, tmp_path)


def test_wrong_functions_are_named_by_their_mistake(tmp_path):
    report = grade(tmp_path, RIGHT.replace("return dx, dweight", "return -dx, g * x * r"))
    assert report.score == 0.0
    for t in report.tests:
        assert t.verdicts["dx"]["pattern"]["name"] == "sign_flipped"
        assert t.verdicts["dweight"]["pattern"]["name"] == (      # one row: (1, 4) is
            "shape" if t.name == "a large row" else "broadcast_not_summed")  # no broadcast
        assert "dx: wrong: right but for the sign" in t.message
    report = grade(tmp_path, RIGHT.replace("return dx, dweight", "return dx * d, dweight"))
    assert report.score == 5.0
    assert "dx: wrong:" in report.tests[0].message and "d =" in report.tests[0].message


FAILURES = {
    "syntax error": ("def rms_norm_backward(x, weight, g)\n    return x\n",
                     "did not load", "SyntaxError", 3),
    "import error": ("import torch\n" + RIGHT, "did not load",
                     "ModuleNotFoundError: No module named 'torch'", 3),
    "no function": ("import numpy as np\ndef rms_norm(x, weight, g):\n    return x\n",
                    "defines no function rms_norm_backward(x, weight, g)", "", 3),
    "an exception": (RIGHT.replace("    d = x.shape[-1]", "    d = x.shape[-1]\n"
                                   "    if d == 4:\n        raise ValueError('boom')"),
                     "ValueError: boom", 'line 7, in rms_norm_backward', 2),
    "a wrong return": ("def rms_norm_backward(x, weight, g):\n    return 1\n",
                       "must return 2 arrays (dx, dweight)", "", 3),
    "a crash": ("import os\n" + RIGHT.replace("    d = x.shape[-1]", "    d = x.shape[-1]\n"
                                           "    if d == 4:\n        os.abort()"),
                "the process ended in the middle of this case", "", 2),
    "a memory bomb": (RIGHT.replace("    d = x.shape[-1]", "    d = x.shape[-1]\n"
                                    "    if d == 4:\n        b = [np.empty(1 << 26)"
                                    " for _ in range(10 ** 4)]"),
                      "ran out of memory", "", 2),
    "sys.exit at import": ("import sys\nsys.exit(0)\n" + RIGHT,
                           "called sys.exit(0)", "", 3),
    "os._exit in the function": ("import os\n" + RIGHT.replace(
        "    d = x.shape[-1]", "    d = x.shape[-1]\n    if d == 4:\n        os._exit(0)"),
        "the process ended in the middle of this case", "", 2),
}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_each_failure_kind_costs_its_cases_with_a_clear_message(tmp_path, kind):
    source, says, detail, failed = FAILURES[kind]
    report = grade(tmp_path, source)
    bad = [t for t in report.tests if t.score == 0]
    assert len(bad) == failed, [t.message for t in report.tests]
    for t in bad:
        assert t.message.startswith("0 points: ") and says in t.message
        assert detail in t.message
    if failed == 2:                    # the cases of width 4 fail; the student's own runs
        assert report.tests[0].score == report.tests[0].max_score
    assert_complete(report, tmp_path)


def test_claimed_arrays_for_a_function_exercise_are_refused_in_words(tmp_path):
    report = grade(tmp_path, "{}", name="answers.json")
    assert report.score == 0 and all(
        "takes a .py file or a notebook defining rms_norm_backward(x, weight, g) ->"
        " (dx, dweight)" in t.message for t in report.tests)


def test_an_infinite_loop_on_every_case_ends_within_the_budget(tmp_path):
    report = grade(tmp_path, "def rms_norm_backward(x, weight, g):\n    while True:\n"
                   "        pass\n", budget=3.0)
    assert report.score == 0.0
    assert all("did not finish within its share of the time" in t.message
               or "time" in t.message for t in report.tests)
    assert_complete(report, tmp_path)


def test_a_loop_in_one_case_costs_that_case_only(tmp_path):
    report = grade(tmp_path, RIGHT.replace("    d = x.shape[-1]", "    d = x.shape[-1]\n"
                                           "    while x.shape[0] == 1:\n        pass"),
                   budget=4.0)
    assert [t.score > 0 for t in report.tests] == [True, True, False]
    assert "did not finish" in report.tests[2].message


def test_a_notebook_runs_its_code_cells_without_magics_or_shell_escapes(tmp_path):
    cells = [{"cell_type": "markdown", "source": ["# my answer"]},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "!rm -rf ~\n",
                                              "import numpy as np"]},
             {"cell_type": "code", "source": "%%bash\necho never run\n"},
             {"cell_type": "code", "source": "import matplotlib.pyplot as plt"},
             {"cell_type": "code", "source": RIGHT}]
    report = grade(tmp_path, json.dumps({"cells": cells, "nbformat": 4, "metadata": {},
                                         "nbformat_minor": 5}), name="answer.ipynb")
    assert report.score == 10.0
    text = formats.render(report, "text")
    assert "cell 4 raised an error" not in text or "matplotlib" in text


def test_the_command_writes_each_format_and_exits_0_whatever_the_score(tmp_path, capsys):
    sub = tmp_path / "sub.py"
    sub.write_text("def rms_norm_backward(x, weight, g)\n")
    out = tmp_path / "out" / "results.json"
    assert main(["grade", str(RMS), str(sub), "--format", "gradescope", "--results",
                 str(out), "--student", "ada", "--time-limit", "5", "--practice"]) == 0
    results = json.loads(out.read_text())
    assert results["score"] == 0 and results["max_score"] == 10.0
    assert len(results["tests"]) == 3 and str(tmp_path) not in out.read_text()
    assert "SyntaxError" in results["tests"][0]["output"]
    bad = tmp_path / "bad.toml"
    bad.write_text("id = 'x'\n")
    assert main(["grade", str(bad), str(sub), "--format", "prairielearn", "--results",
                 str(out), "--practice"]) == 2
    results = json.loads(out.read_text())
    assert results["score"] == 0 and "exercise file is not valid" in results["tests"][0]["message"]
    assert str(tmp_path) not in out.read_text()
    assert "bad.toml" in capsys.readouterr().err
    # to stdout too, the instructor's log (stderr) ends with who was graded, with what
    assert main(["grade", str(RMS), str(sub), "--format", "text", "--student", "ada",
                 "--time-limit", "5"]) == 0
    captured = capsys.readouterr()
    assert "0 / 10" in captured.out, captured.out
    assert captured.err.splitlines()[-1] == ("rmsnorm-backward: 0 / 10 points (0 of 3 tests"
                                             " right); student 'ada', salt: the practice salt")


def test_without_root_the_log_not_the_results_says_which_protections_were_off(
        tmp_path, monkeypatch, capsys):
    """Where the grader is not root, the separate user and the jail are off: the report
    knows, the instructor's log (stderr) says so, and no format shows it to the
    student (it would tell them where to push)."""
    from glassllm.course.grader import jail

    made = jail.find_or_make()          # the same private Python, not a second one
    monkeypatch.setenv(jail.CACHE_ENV, str(made.root.parent))
    runner.isolation.cache_clear()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    try:
        report = grade(tmp_path, RIGHT)
        sub = tmp_path / "right.py"
        sub.write_text(RIGHT)
        assert main(["grade", str(RMS), str(sub), "--format", "gradescope", "--practice",
                     "--results", str(tmp_path / "results.json"), "--time-limit", "10"]) == 0
    finally:
        runner.isolation.cache_clear()
    assert report.score == 10.0
    off = report.protections_off
    assert [o.split(":")[0] for o in off][:2] == ["separate user", "file-system jail"]
    for fmt in formats.FORMATS:
        text = formats.render(report, fmt)
        assert "separate user" not in text and "protections" not in text
    assert "separate user" not in (tmp_path / "results.json").read_text()
    err = capsys.readouterr().err
    assert "glassllm grade: protections off on this grader: separate user: the grader is" \
           " not root" in err


def _unshare_prefix() -> list[str] | None:
    import shutil
    import subprocess

    unshare = shutil.which("unshare")
    flags = ["-n"] if os.geteuid() == 0 else ["-rn"]
    if unshare is None or subprocess.run([unshare, *flags, "true"],
                                         capture_output=True).returncode != 0:
        return None
    return [unshare, *flags, "--"]


def test_grading_with_the_network_off_gives_the_same_results(tmp_path):
    """A course's grader runs with no network (PrairieLearn's default): `glassllm grade`
    in a new network namespace, where this machine allows one, equals it with a network."""
    import subprocess

    prefix = _unshare_prefix()
    if prefix is None:
        pytest.skip("no new network namespace here (unshare -n is not permitted)")
    sub = tmp_path / "sub.py"
    sub.write_text(RIGHT.replace("return dx, dweight", "return dx, dweight * 2"))
    runs = []
    for head in ([], prefix):
        out = tmp_path / f"results-{len(head)}.json"
        subprocess.run([*head, sys.executable, "-m", "glassllm.apps.cli", "grade", str(RMS),
                        str(sub), "--student", "ada", "--format", "json", "--results",
                        str(out)], check=True, capture_output=True, timeout=60)
        report = json.loads(out.read_text())
        report.pop("seconds")
        runs.append(report)
    assert runs[0] == runs[1]
    assert runs[0]["score"] == 5.0


def test_a_flood_of_output_is_kept_to_64_kb_per_case(tmp_path):
    report = grade(tmp_path, RIGHT.replace("    return dx", "    print('x' * 300_000)\n"
                                           "    return dx"))
    assert report.score == 10.0
    for t in report.tests:
        assert runner.OUTPUT_PER_CASE <= len(t.output.encode()) < runner.OUTPUT_PER_CASE + 200
        assert "bytes left out" in t.output


def test_a_kind_registers_itself_without_editing_the_grader(tmp_path, monkeypatch):
    """The registry a new kind of exercise (mystery mode's) plugs into."""
    from glassllm.course.grader import KINDS, TestResult, register

    seen = []

    def grade_kind(job):
        seen.append((job.exercise.id, job.student, job.budget))
        return [TestResult("it", 1.0, 1.0, "it: right")]

    monkeypatch.setitem(KINDS, "function", KINDS["function"])
    assert register("function", grade_kind) is grade_kind
    report = grade(tmp_path, RIGHT)
    assert seen == [("rmsnorm-backward", "ada", 10.0)] and report.score == 1.0


def test_top_level_prints_are_kept_beside_the_first_case_s_output(tmp_path):
    report = grade(tmp_path, "print('loading my answer')\n" + RIGHT.replace(
        "    return dx", "    print('row', d)\n    return dx"))
    assert report.score == 10.0
    assert report.tests[0].output == ("printed while your code was loaded:\n"
                                      "loading my answer\n\nprinted in this case:\nrow 8\n")
    assert [t.output.strip() for t in report.tests[1:]] == ["row 4", "row 4"]
    report = grade(tmp_path, "print('x' * 200_000)\n" + RIGHT)      # bounded, as a case's
    assert runner.OUTPUT_PER_CASE <= len(report.tests[0].output.encode()) \
        < runner.OUTPUT_PER_CASE + 200


@pytest.mark.parametrize("fmt", ["gradescope", "prairielearn", "json"])
def test_a_broken_exercise_file_passes_no_test_in_any_format(tmp_path, fmt):
    sub = tmp_path / "sub.py"
    sub.write_text(RIGHT)
    bad = tmp_path / "bad.toml"
    bad.write_text("id = 'x'\n")
    out = tmp_path / "results.json"
    assert main(["grade", str(bad), str(sub), "--format", fmt, "--results", str(out)]) == 2
    results = json.loads(out.read_text())
    assert results["score"] == 0
    if fmt == "gradescope":            # Gradescope shows a passed test in green: none
        assert [t["status"] for t in results["tests"]] == ["failed"]
    elif fmt == "prairielearn":        # PrairieLearn's own word for it
        assert results["gradable"] is False
    else:
        assert results["graded"] is False and results["tests"][0]["passed"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="the private Python is entered as root")
def test_a_grader_whose_student_python_cannot_start_writes_not_graded(tmp_path):
    """A failure of the grader itself (here its private Python lost its interpreter) is
    never a score: exit status 3, "not graded" (no test passed; PrairieLearn's gradable
    false), the reason in the instructor's log."""
    import subprocess

    from glassllm.course.grader import jail

    made = jail.find_or_make()
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    subprocess.run(["cp", "-al", str(made.root), str(cache / made.root.name)], check=True)
    (cache / made.root.name / jail.PYTHON.lstrip("/")).unlink()
    sub = tmp_path / "sub.py"
    sub.write_text(RIGHT)
    for fmt in ("gradescope", "prairielearn"):
        out = tmp_path / f"{fmt}.json"
        done = subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade", str(RMS),
                               str(sub), "--format", fmt, "--practice", "--results",
                               str(out)],
                              env={**os.environ, jail.CACHE_ENV: str(cache)},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 3, done.stderr
        assert "GraderError: the student's Python did not start" in done.stderr
        results = json.loads(out.read_text())
        assert results["score"] == 0
        assert "not graded: the grader failed" in results["tests"][0]["output"] + \
            results["tests"][0].get("message", "")
        assert results.get("gradable", False) is False
        assert all(t.get("status", "failed") == "failed" for t in results["tests"])


SURVIVED = {      # what would crash or stall the grader, in a submission that is right
    "folders nested 3000 deep (a recursive removal overflows)": '''
import os
here = os.getcwd()
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
os.chdir(here)
''',
    "a case mark of 10 000 digits (int() refuses it)": '''
print("\\x1e" + "9" * 10_000)
''',
    "an event of 10 000 digits": '''
import os, sys
os.write(int(sys.argv[3]), b"start " + b"9" * 10_000 + b"\\n")
''',
    "a million forged case marks": '''
import sys
sys.stdout.write("\\x1e1\\n\\x1e0\\n" * 500_000)
''',
}


@pytest.mark.parametrize("kind", sorted(SURVIVED))
def test_what_would_crash_the_grader_leaves_a_right_grade_right(tmp_path, kind):
    """A failure of the grader would be "not graded" (a PrairieLearn submission that
    counts for nothing) in place of the student's 0, or no result at all: these are
    what a student who wants that tries; each right function still scores every point."""
    import subprocess

    sub = tmp_path / "sub.py"
    sub.write_text(SURVIVED[kind] + RIGHT)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade", str(RMS),
                           str(sub), "--student", "ada", "--format", "json", "--results",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results["graded"] is True and results["score"] == 10.0
    if "forged" in kind:                 # forged marks stay the student's text, bounded
        assert all(len(t["output"].encode()) < runner.OUTPUT_PER_CASE + 200
                   for t in results["tests"])
    iso = runner.isolation()
    if iso.jail is not None:             # and what it made is gone
        assert [p.name for p in (iso.jail.root / "work").iterdir()
                if p.stat().st_mtime > out.stat().st_mtime - 600] == []
