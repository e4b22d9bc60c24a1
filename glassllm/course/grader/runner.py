"""Student code in a process of its own: spawned fresh (never a fork of the grader) as
``python -I -S`` with only NumPy on its path, under another user when the grader is root,
in its own process group (killed whole at the end), with no network where a network
namespace may be made, in an empty private directory, with no setting of the grader in
its environment, and with limits on CPU time, address space, processes, file size and
open files (set by the child's first lines, `harness`, before the student's code runs).

`run_function` runs a function on every case within one time budget; a case that loops
or kills its process costs that case only: the next cases run in a fresh process with
the time left, shared among them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["CaseRun", "Isolation", "isolation", "run_function"]

HARNESS = Path(__file__).with_name("harness.py")
NOBODY = 65534                     # the unprivileged user of Debian and most images
OUTPUT_PER_CASE = 64 * 1024        # bytes of a case's stdout + stderr kept for its report
MEMORY = 1 << 30                   # address space of the child, bytes
FILE_SIZE = 64 << 20               # largest file it may write (its answers), bytes
OPEN_FILES = 64
START_SHARE = 2.0                  # seconds the interpreter's start may take before case 0
EVENT_BYTES = 8 << 20              # the most read from the event pipe: a case's line is ≤ 64 KB


@dataclass
class CaseRun:
    """What the child did on one case: ``answers`` (return name → array) when it
    returned, else ``error`` (what went wrong, in words for the student)."""

    answers: dict[str, np.ndarray] | None = None
    error: str | None = None
    output: str = ""


@dataclass(frozen=True)
class Isolation:
    """Which protections this machine allows (`isolation`); the off ones are reported."""

    user: int | None               # the child's uid, None: the grader's own (not root)
    netns: tuple[str, ...]         # the command prefix making a network namespace, or ()
    python: str                    # the interpreter the child runs
    off: tuple[str, ...] = field(default=())


@functools.cache
def isolation() -> Isolation:
    """Probe once: a separate user needs root and an interpreter that user may run (a
    Python under /root is not: then Debian's own, of the same version, if there is one);
    a network namespace needs an unprivileged user namespace (``unshare -rn``)."""
    off = []
    user = NOBODY if os.geteuid() == 0 else None
    python = _python_for(user) if user is not None else os.path.realpath(sys.executable)
    if python is None:
        off.append(f"separate user: no Python {_VERSION} with NumPy that an unprivileged"
                   " user may run (the grader's is under a private directory)")
        user, python = None, os.path.realpath(sys.executable)
    elif user is None:
        off.append("separate user: the grader is not root, so the student's code runs as"
                   " the grader's own user (its files and the grader's are not apart)")
    netns: tuple[str, ...] = ()
    unshare = shutil.which("unshare")
    # --map-current-user keeps the child's own uid inside (util-linux 2.38); -r maps it
    # to a root of the new user namespace, which has no power outside it
    for flags in (("--map-current-user", "-n"), ("-rn",)):
        if unshare and _runs([unshare, *flags, "true"], user):
            netns = (unshare, *flags, "--")
            break
    else:
        off.append("network namespace: not permitted here (unshare -rn failed); run the"
                   " grader with its network off (docker run --network none)")
    return Isolation(user, netns, python, tuple(off))


_VERSION = "{}.{}".format(*sys.version_info[:2])


def _runs(argv: list[str], user: int | None, says: str | None = None) -> bool:
    try:
        done = subprocess.run(argv, user=user, group=user, capture_output=True, timeout=10,
                              extra_groups=[] if user is not None else None, cwd="/",
                              env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and (says is None or done.stdout.decode().strip() == says)


def _python_for(user: int) -> str | None:
    """An interpreter `user` may run, of the grader's version, importing NumPy from
    `_numpy_dir` (a checkout under a private directory is not readable by it)."""
    probe = ("import sys; sys.path.append(sys.argv[1]); import numpy;"
             " print('%d.%d' % sys.version_info[:2])")
    for python in (os.path.realpath(sys.executable), f"/usr/local/bin/python{_VERSION}",
                   f"/usr/bin/python{_VERSION}"):
        if os.path.exists(python) and _runs([python, "-I", "-S", "-c", probe, _numpy_dir()],
                                            user, _VERSION):
            return python
    return None


@functools.cache
def _numpy_dir() -> str:
    """A directory holding only NumPy (links to it and its bundled libraries), so the
    child imports NumPy and nothing else of the grader's environment."""
    site = Path(np.__file__).resolve().parent.parent
    target = Path(tempfile.mkdtemp(prefix="glassllm-numpy-"))
    atexit.register(shutil.rmtree, target, True)
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            (target / name).symlink_to(site / name)
    target.chmod(0o755)
    return str(target)


@contextlib.contextmanager
def _not_dumpable():
    """While the child runs, the grader's /proc entries (environ, fds, memory, cwd) are
    closed to processes of its own user: the same-user case, when not root."""
    prctl = None
    with contextlib.suppress(OSError, AttributeError):      # Linux only
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_dumpable = 4
    if prctl is not None:
        prctl(pr_set_dumpable, 0, 0, 0, 0)
    try:
        yield
    finally:
        if prctl is not None:
            prctl(pr_set_dumpable, 1, 0, 0, 0)


def _limits(seconds: float) -> dict[str, int]:
    # CPU time is a backstop: the wall clock ends a loop first (one thread: CPU ≤ wall),
    # so a loop is always told as a loop, not as a killed process
    return {"CPU": int(seconds) + 5, "AS": MEMORY, "NPROC": 0,
            "FSIZE": FILE_SIZE, "NOFILE": OPEN_FILES}


def run_function(code: list[dict], notebook: bool, function: str, params: list[str],
                 returns: list[str], cases: list[dict[str, np.ndarray]],
                 budget: float) -> list[CaseRun]:
    """Run `function` of the submission (`code`: chunks ``{name, source}``) on each case
    (its arguments by parameter) within `budget` seconds in all; one `CaseRun` per case,
    always."""
    iso = isolation()
    runs = [CaseRun() for _ in cases]
    deadline = time.monotonic() + budget
    first = 0
    with tempfile.TemporaryDirectory(prefix="glassllm-grade-") as home:
        while first < len(cases):
            left = deadline - time.monotonic()
            if left <= 0.05:
                for run in runs[first:]:
                    run.error = run.error or ("not run: the submission's time"
                                              f" ({budget:g} s in all) was used up")
                break
            first = _one_child(Path(home), iso, code, notebook, function, params, returns,
                               cases, runs, first, left)
    return runs


def _private_dir(home: Path, iso: Isolation) -> Path:
    work = Path(tempfile.mkdtemp(dir=home, prefix="child-"))
    if iso.user is not None:
        os.chown(work, iso.user, iso.user)
    work.chmod(0o700)
    return work


def _one_child(home: Path, iso: Isolation, code: list[dict], notebook: bool, function: str,
               params: list[str], returns: list[str], cases: list[dict], runs: list[CaseRun],
               first: int, left: float) -> int:
    """One child from case `first` on; returns the first case left to run."""
    home.chmod(0o711)
    work = _private_dir(home, iso)
    task = {"code": code, "notebook": notebook, "function": function, "params": params,
            "returns": returns, "cases": len(cases), "first": first}
    (work / "task.json").write_text(json.dumps(task), encoding="utf-8")
    np.savez(work / "inputs.npz", **{f"{k}/{p}": np.asarray(c[p]) for k, c in
                                     enumerate(cases) for p in params})
    shutil.copyfile(HARNESS, work / "harness.py")
    if iso.user is not None:
        for name in ("task.json", "inputs.npz", "harness.py"):
            os.chown(work / name, iso.user, iso.user)
    out_path, err_path = home / f"out-{first}", home / f"err-{first}"
    events_r, events_w = os.pipe()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    argv = [*iso.netns, iso.python, "-I", "-S", "harness.py", _numpy_dir(),
            json.dumps(_limits(left)), str(events_w)]
    with open(out_path, "wb") as out, open(err_path, "wb") as err, _not_dumpable():
        child = subprocess.Popen(
            argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            pass_fds=(events_w,), process_group=0, user=iso.user, group=iso.user,
            extra_groups=[] if iso.user is not None else None, close_fds=True)
        os.close(events_w)
        events = _watch(child, events_r, first, len(cases), left)
    _kill_group(child)
    os.close(events_r)
    return _collect(work, events, out_path, err_path, runs, first, returns, left)


def _watch(child: subprocess.Popen, events_r: int, first: int, n: int,
           left: float) -> list[tuple[str, int | None, str]]:
    """Read the child's events until it exits or overruns: the whole child's time is
    `left`; a case may use the time left shared among the cases not yet done."""
    start = time.monotonic()
    deadline = start + left
    case_deadline = start + min(left, left / (n - first) + START_SHARE)
    events: list[tuple[str, int | None, str]] = []
    buffer, read = b"", 0
    while True:
        now = time.monotonic()
        wait = min(deadline, case_deadline) - now
        if wait <= 0:
            events.append(("timeout", None, ""))
            return events
        ready, _, _ = select.select([events_r], [], [], min(wait, 0.5))
        if not ready:
            if _exited(child.pid):
                return events
            continue
        chunk = os.read(events_r, 65536)
        if not chunk:                     # the pipe closed: the child is exiting
            end = time.monotonic() + min(1.0, max(0.0, deadline - time.monotonic()))
            while not _exited(child.pid) and time.monotonic() < end:
                time.sleep(0.005)
            return events
        buffer += chunk
        read += len(chunk)
        if read > EVENT_BYTES:             # a flood on the event pipe: not the harness
            events.append(("flood", None, ""))
            return events
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            kind, _, rest = raw.decode("utf-8", "replace").partition(" ")
            number, _, message = rest.partition(" ")
            k = int(number) if number.isdigit() else None
            events.append((kind, k, message if k is not None else rest))
            if kind == "start" and k is not None:
                now = time.monotonic()
                remaining = max(1, n - k)
                case_deadline = now + (deadline - now) / remaining
            elif kind in ("done", "fail"):
                case_deadline = deadline


def _exited(pid: int) -> bool:
    """Has the child exited? Without reaping it: its pid, the group's id, stays taken
    until the group is killed (`_kill_group`), so no other group can be given it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_group(child: subprocess.Popen) -> None:
    """The child's whole process group: whatever it started dies with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _outputs(path: Path, first: int) -> dict[int, str]:
    """The child's output split at the harness's case marks (``\x1eK``), each case's
    kept to `OUTPUT_PER_CASE` bytes (its start and its end); -1: before any case."""
    data = path.read_bytes()
    out: dict[int, bytearray] = {}
    k = -1
    for piece in data.split(b"\x1e"):
        head, nl, rest = piece.partition(b"\n")
        if nl and head.isdigit() and piece is not data:
            k = int(head)
            piece = rest
        out.setdefault(k, bytearray()).extend(piece)
    return {k: _clip(bytes(v)) for k, v in out.items()}


def _clip(data: bytes) -> str:
    if len(data) > OUTPUT_PER_CASE:
        half = OUTPUT_PER_CASE // 2
        data = (data[:half] + f"\n[... {len(data) - OUTPUT_PER_CASE} bytes left out ...]\n"
                .encode() + data[-half:])
    return data.decode("utf-8", "replace")


def _collect(work: Path, events: list, out_path: Path, err_path: Path, runs: list[CaseRun],
             first: int, returns: list[str], left: float) -> int:
    """Each case's fate from the events and the answer files; the next case to run."""
    outs, errs = _outputs(out_path, first), _outputs(err_path, first)
    for k in range(first, len(runs)):
        runs[k].output = _join(outs.get(k, ""), errs.get(k, ""))
    preamble = _join(outs.get(-1, ""), errs.get(-1, ""))
    started: int | None = None
    for kind, k, message in events:
        if kind == "load":
            error = "the submission did not load:\n" + _message(message)
            for run in runs[first:]:
                run.error, run.output = error, preamble
            return len(runs)
        if kind == "start" and k is not None and first <= k < len(runs):
            started = k
        elif kind == "fail" and k is not None and first <= k < len(runs):
            runs[k].error = _message(message)
            started = None
        elif kind == "done" and k is not None and first <= k < len(runs):
            runs[k].answers = _answers(work / "answers" / f"{k}.npz", returns)
            if runs[k].answers is None:
                runs[k].error = "its answers could not be read (changed or removed)"
            started = None
        elif kind in ("timeout", "flood"):
            why = (f"did not finish within its share of the time ({left:g} s left for"
                   " the cases not yet run): an infinite loop, or far too slow"
                   if kind == "timeout" else "wrote a flood of lines to the grader's pipe")
            k = started if started is not None else first
            runs[k].error = why
            return k + 1
    if started is not None:
        runs[started].error = ("the process ended in the middle of this case (a crash,"
                               " os._exit, a signal, or a limit: memory, CPU time, file"
                               " size)")
        return started + 1
    done = [k for kind, k, _ in events if kind in ("done", "fail") and k is not None]
    if not done:
        for run in runs[first:]:
            run.error = ("the process ended before running any case (a crash, os._exit,"
                         " or a limit while loading)")
            run.output = run.output or preamble
        return len(runs)
    nxt = max(done) + 1
    for run in runs[nxt:]:
        run.error = "not run: the process ended after the previous case"
    return len(runs)


def _join(out: str, err: str) -> str:
    return out + (("\n" if out and not out.endswith("\n") else "") + err if err else "")


def _message(raw: str) -> str:
    try:
        text = json.loads(raw)
    except ValueError:
        text = raw
    return _clip(str(text).encode("utf-8", "replace"))


def _answers(path: Path, returns: list[str]) -> dict[str, np.ndarray] | None:
    try:
        if path.is_symlink() or path.stat().st_size > FILE_SIZE:
            return None
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: np.asarray(data[name], dtype=np.float64) for name in returns}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return arrays
