"""A submission that tries, in one run, every way around the grader a student has been
reported to try, from inside a grader image (docker/grader/smoke.py runs it in both,
with --network none): it prints one line per attempt, ``NAME denied ERROR`` or
``NAME WORKED``, and returns zeros (it scores 0 whatever happens; smoke.py checks that no
attempt worked). The paths are the platforms' documented ones and the images' own.
"""

import ctypes
import errno
import glob
import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np

FAKE = json.dumps({"score": 1.0, "max_score": 8.0, "gradable": True, "tests": []})
_done = []


def attempt(what, action):
    try:
        action()
    except BaseException as exc:
        print(what, "denied", type(exc).__name__)
        return
    print(what, "WORKED")


def libc_call(name, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) == -1:
        raise OSError(ctypes.get_errno(), errno.errorcode.get(ctypes.get_errno(), "?"))


def read(path):
    with open(path, "rb") as f:
        return f.read(1)


def write(path):
    with open(path, "w") as f:
        f.write(FAKE)


def everything():
    ppid = os.getppid()
    for path in ("/grade/tests/softmax-backward.toml", "/autograder/source/softmax-backward.toml",
                 "/grade/data/data.json", "/autograder/submission_metadata.json",
                 "/grade/serverFilesCourse/salt", "/autograder/source/salt",
                 "/grade/student/answer.py", "/autograder/submission/answer.py"):
        attempt(f"read {path}", lambda p=path: read(p))
    for pid in (ppid, 1):
        # (a command line is world-readable where there is a /proc: no secret is on it)
        for name in ("environ", "maps", "mem"):
            attempt(f"read /proc/{pid}/{name}", lambda p=f"/proc/{pid}/{name}": read(p))
        attempt(f"list /proc/{pid}/fd", lambda p=f"/proc/{pid}/fd": os.listdir(p))
        attempt(f"ptrace attach {pid}", lambda p=pid: libc_call("ptrace", 16, p, 0, 0))
        for sig in (signal.SIGSTOP, signal.SIGTERM):
            attempt(f"kill {pid} {sig.name}", lambda p=pid, s=sig: os.kill(p, s))
    for folder in ("/grade/results", "/autograder/results"):
        attempt(f"write {folder}/results.json", lambda f=folder: write(f + "/results.json"))
        attempt(f"symlink into {folder}", lambda f=folder: os.symlink(
            "/etc/hostname", f + "/link.json"))
    sites = glob.glob("/opt/*/lib/python3*/site-packages") or [
        "/opt/venv/lib/python3/site-packages"]
    for path in [s + "/sitecustomize.py" for s in sites] + [
            os.path.dirname(np.__file__) + "/cheat.py",
            os.path.dirname(os.__file__) + "/sitecustomize.py"]:
        attempt(f"write {path}", lambda p=path: write(p))
    for folder in ("/tmp", "/var/tmp"):       # (/dev/shm, Docker's, is swept after the run)
        attempt(f"write {folder}", lambda f=folder: write(f + "/left-behind"))
    attempt("fork", lambda: os.fork() or os._exit(0))
    attempt("subprocess", lambda: subprocess.Popen([sys.executable, "-c", "pass"]))
    attempt("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
    for name in ("glassllm", "torch", "jax"):
        attempt(f"import {name}", lambda n=name: __import__(n))


def softmax_backward(x, g):
    if not _done:
        _done.append(1)
        everything()
    return np.zeros_like(x)
