"""tools/commit_subjects.py (CI's "commits" stage, docs/testing.md#commits) on a real git
repository made for the test: each rule names the commit and the rule; a merge needs only
its subject; a base outside the history is its own exit code."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from paths import ROOT

SPEC = importlib.util.spec_from_file_location("commit_subjects",
                                              ROOT / "tools" / "commit_subjects.py")
commit_subjects = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(commit_subjects)


@pytest.mark.parametrize(("message", "parents", "found"), [
    ("Fix the scatter-add\n\nTwo ids in one row were summed once.\n", 1, []),
    ("x" * 72 + "\n\nwhy\n", 1, []),
    ("x" * 73 + "\n\nwhy\n", 1, ["a subject of 73 characters (at most 72)"]),
    ("Fix it\n", 1, ["no body saying why"]),
    ("Fix it\nwhy, with no blank line\n", 1, ["no blank line after the subject"]),
    ("\n\nbody only\n", 1, ["an empty subject"]),
    ("Merge branch 'book'\n", 2, []),
    ("Merge " + "y" * 80 + "\n", 2, ["a subject of 86 characters (at most 72)"]),
])
def test_each_rule(message, parents, found):
    assert commit_subjects.problems("0" * 40, parents, message) == found


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@example.org", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_real_history_after_its_base(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / ".ci").mkdir()
    (repo / "tools" / "commit_subjects.py").write_bytes(
        (ROOT / "tools" / "commit_subjects.py").read_bytes())
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "a base with a subject far longer than any rule would let"
         " pass, which is not checked")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / ".ci" / "commit-base").write_text(base + "\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "Record the base\n\nCommits after it are checked.")
    run = [sys.executable, str(repo / "tools" / "commit_subjects.py")]
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == 0 and "1 commits after" in done.stdout, done.stdout
    (repo / "a").write_text("a")
    _git(repo, "add", "a")
    _git(repo, "commit", "-q", "-m", "z" * 80)
    bad = _git(repo, "rev-parse", "HEAD")
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{bad[:12]} " in done.stdout and "a subject of 80 characters (at most 72)" in \
        done.stdout and "no body saying why" in done.stdout and "2 problems" in done.stdout
    done = subprocess.run([*run, "--base", "0" * 40], capture_output=True, text=True)
    assert done.returncode == 2 and "not in this clone's history" in done.stderr


def test_the_recorded_base_is_in_this_history():
    base = (ROOT / ".ci" / "commit-base").read_text().split()[0]
    assert len(base) == 40
    done = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", base, "HEAD"])
    assert done.returncode == 0
