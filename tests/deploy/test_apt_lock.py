"""`make test` and `make docker-test` wait for another apt's lock instead of failing
(tools/apt_get.sh): right after a machine boots, unattended upgrades hold it.

The real apt-get runs against a package-lists folder and a dpkg admin folder of the test's
own (`-o Dir::State::Lists`, `-o Dir::State::status`), whose lock files a child process
holds for a few seconds with the same fcntl lock apt takes: nothing of the machine's apt
state is read or changed, and nothing is downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_server import ROOT

SCRIPT = ROOT / "tools" / "apt_get.sh"
HOLD = ("import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(float(sys.argv[2]))\n")

needs_apt = pytest.mark.skipif(
    shutil.which("apt-get") is None or os.geteuid() != 0,
    reason="needs Debian's apt-get, run as root (as make test runs it)")


@pytest.fixture
def apt_dirs(tmp_path):
    """Empty package lists and a dpkg admin folder with an empty status, of this test's own."""
    (tmp_path / "lists" / "partial").mkdir(parents=True)
    (tmp_path / "dpkg").mkdir()
    (tmp_path / "dpkg" / "status").write_text("")
    return ["-o", f"Dir::State::Lists={tmp_path / 'lists'}",
            "-o", f"Dir::State::status={tmp_path / 'dpkg' / 'status'}",
            "-o", f"Dir::Cache={tmp_path / 'cache'}",
            "-o", "Dir::Etc::SourceList=/dev/null",
            "-o", f"Dir::Etc::SourceParts={tmp_path / 'none'}"], tmp_path


def _held(lock: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _apt_get(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


@needs_apt
@pytest.mark.parametrize(("lock", "command"), [("lists/lock", "update"),
                                               ("dpkg/lock-frontend", "check")])
def test_apt_get_waits_for_a_held_lock(apt_dirs, lock, command):
    """`apt-get update` fails at once on a held lists lock (DPkg::Lock::Timeout does not
    cover it); the wrapper runs it again until the lock is free. The dpkg lock is waited
    for by apt itself, told to."""
    options, folder = apt_dirs
    holder = _held(folder / lock, 3.0)
    try:
        done = _apt_get(*options, command)
        # it waited: the holder (which lets go after 3 s and exits) was gone before
        # apt-get was done — an order of events, not a measure of time
        released_first = holder.poll() is not None
    finally:
        holder.kill()
        holder.communicate()
    assert done.returncode == 0, done.stdout + done.stderr
    assert released_first, done.stdout + done.stderr


@needs_apt
def test_apt_get_fails_at_once_on_anything_but_a_lock(apt_dirs):
    options, _ = apt_dirs
    done = _apt_get(*options, "install", "-y", "no-such-package-glassllm")
    assert done.returncode == 100 and "Unable to locate package" in done.stdout
    assert "waiting" not in done.stderr


def test_every_apt_get_of_the_build_goes_through_the_waiting_wrapper():
    """make test (Chromium) and make docker-test (Docker, compose, mmdebstrap)."""
    for path in ["Makefile", "docker/test.sh", "docker/base.sh"]:
        text = (ROOT / path).read_text()
        calls = [line for line in text.splitlines()
                 if re.search(r"\bapt-get\b", line) and not line.lstrip().startswith("#")]
        assert not calls, (path, calls)
        assert "apt_get" in text, path
    script = SCRIPT.read_text()
    assert "DPkg::Lock::Timeout" in script and "APT_LOCK_WAIT:-600" in script
