"""Student code in a process of its own: spawned fresh (never a fork of the grader) as
``python -I -S`` of the private copy of Python and NumPy (`jail`), as a user of its own
when the grader is root (a fresh id per run, `sweep`), with that copy as its root where
the grader may ``chroot``, in its own process group, with no network where a network
namespace may be made, in an empty private directory, with no setting of the grader in
its environment, and with limits on CPU time, address space, processes, file size and
open files (set by the child's first lines, `harness`, before the student's code runs).
After it: every process of its user killed, every file and IPC object of it removed.

`run_function` runs a function on every case within one time budget; a case that loops
or kills its process costs that case only: the next cases run in a fresh process with
the time left, shared among them. Where this grader could not run the student's code at
all (the private Python does not start), it raises `GraderError`: not a score.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import io
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassllm.course.grader import jail as jails
from glassllm.course.grader import sweep

__all__ = ["CaseRun", "GraderError", "Isolation", "cleanup_after", "isolation",
           "run_function"]

HARNESS = Path(__file__).with_name("harness.py")
OUTPUT_PER_CASE = 64 * 1024        # bytes of a case's stdout + stderr kept for its report
MEMORY = 1 << 30                   # address space of the child, bytes
FILE_SIZE = 64 << 20               # largest file it may write (its answers), bytes
OPEN_FILES = 64
START_SHARE = 2.0                  # seconds the interpreter's start may take before case 0
EVENT_BYTES = 8 << 20              # the most read from the event pipe: a case's line is ≤ 64 KB
STALE = 24 * 3600                  # a run's directory older than this was a killed grader's


class GraderError(RuntimeError):
    """This grader could not run the student's code at all (its own fault, never the
    submission's): the results must say "not graded", not a score."""


@dataclass
class CaseRun:
    """What the child did on one case: ``answers`` (return name → array) when it
    returned, else ``error`` (what went wrong, in words for the student)."""

    answers: dict[str, np.ndarray] | None = None
    error: str | None = None
    output: str = ""


@dataclass(frozen=True)
class Isolation:
    """Which protections this machine allows (`isolation`); the off ones are named, for
    the instructor's log (never the student's results)."""

    separate: bool                 # each run as a user of its own (the grader is root)
    jail: jails.Jail | None        # the private Python, None: the grader's own
    chroot: bool                   # the child's "/" is the private Python's directory
    netns: tuple[str, ...]         # the command prefix making a network namespace, or ()
    off: tuple[str, ...] = field(default=())


@functools.cache
def isolation() -> Isolation:
    """Probe once: the private Python (made now if it is not yet), a separate user (the
    grader is root), entering the private Python as the root directory (``chroot``), a
    network namespace (``unshare -n`` as root, else an unprivileged user namespace)."""
    off = []
    root = os.geteuid() == 0
    try:
        jail = jails.find_or_make()
    except jails.JailError as exc:
        jail = None
        off.append(f"private Python: {exc}; the student's code runs the grader's own"
                   " interpreter, which reaches every package installed beside NumPy")
    separate = root and jail is not None
    if not root:
        off.append("separate user: the grader is not root, so the student's code runs as"
                   " the grader's own user (its files and the grader's are not apart)")
    elif jail is None:
        off.append("separate user: without the private Python the student's code runs"
                   " as root")
    chroot = False
    if separate:
        prefix = jails.chroot_argv(jail.root, jails.probe_uid())
        chroot = prefix is not None and _runs(
            [*prefix, jails.PYTHON, "-I", "-S", "-c", "pass"], None,
            env=jails.probe_env(jails.LIBS))
    if not chroot:
        why = ("the grader is not root" if not root else
               "no private Python" if jail is None else "chroot is not permitted here")
        off.append(f"file-system jail: {why}, so the student's code sees this machine's"
                   " files as its user may (the images' permissions still hold)")
    netns: tuple[str, ...] = ()
    unshare = shutil.which("unshare")
    probe_user = jails.probe_uid() if separate and not chroot else None
    # as root (the child then enters the jail), a plain network namespace; otherwise the
    # child's own user in a user namespace: --map-current-user keeps its uid inside
    # (util-linux 2.38); -r maps it to a root of the namespace, powerless outside it
    tries = (("-n",),) if chroot else (("--map-current-user", "-n"), ("-rn",))
    for flags in tries:
        if unshare and _runs([unshare, *flags, "true"], probe_user):
            netns = (unshare, *flags, "--")
            break
    else:
        off.append("network namespace: not permitted here (unshare -n failed); run the"
                   " grader with its network off (docker run --network none)")
    return Isolation(separate, jail, chroot, netns, tuple(off))


def _runs(argv: list[str], user: int | None, env: dict | None = None) -> bool:
    try:
        done = subprocess.run(argv, user=user, group=user, capture_output=True, timeout=10,
                              extra_groups=[] if user is not None else None, cwd="/",
                              env=env or {"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def _numpy_dir() -> str:
    """Without the private Python: a directory holding only links to NumPy, so at least
    the child's path holds nothing else (its real path still leads to site-packages)."""
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
    closed to processes of its own user, and it cannot be traced: the same-user case."""
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
    return {"CPU": int(seconds) + 5, "AS": MEMORY, "NPROC": 0, "CORE": 0, "MSGQUEUE": 0,
            "FSIZE": FILE_SIZE, "NOFILE": OPEN_FILES}


def run_function(code: list[dict], notebook: bool, function: str, params: list[str],
                 returns: list[str], cases: list[dict[str, np.ndarray]],
                 budget: float) -> list[CaseRun]:
    """Run `function` of the submission (`code`: chunks ``{name, source}``) on each case
    (its arguments by parameter) within `budget` seconds in all; one `CaseRun` per case,
    always. Raises `GraderError` when the student's Python could not be started."""
    iso = isolation()
    runs = [CaseRun() for _ in cases]
    deadline = time.monotonic() + budget
    user = sweep.fresh_id() if iso.separate else None
    base = _work_base(iso)
    first = 0
    with tempfile.TemporaryDirectory(prefix="glassllm-grade-") as home:
        while first < len(cases):
            left = deadline - time.monotonic()
            if left <= 0.05:
                for run in runs[first:]:
                    run.error = run.error or ("not run: the submission's time"
                                              f" ({budget:g} s in all) was used up")
                break
            first = _one_child(Path(home), base, iso, user, code, notebook, function,
                               params, returns, cases, runs, first, left)
    return runs


_DEFERRED: list | None = None


@contextlib.contextmanager
def cleanup_after():
    """Within it, what each child left on disk is removed when it ends, not after each
    child, so the grader writes its results first: a student's tree of folders nested
    100 000 deep takes longer to remove than to make. (Its processes are killed at once,
    whatever.)"""
    global _DEFERRED
    outer, _DEFERRED = _DEFERRED, []
    try:
        yield
    finally:
        pending, _DEFERRED = _DEFERRED, outer
        for task in pending:
            task()


def _later(task) -> None:
    if _DEFERRED is None:
        task()
    else:
        _DEFERRED.append(task)


def _work_base(iso: Isolation) -> Path:
    """Where each run's private directory is made: the private Python's ``work/`` (0711,
    root's), pruned of what a killed grader left; else this machine's temporary one."""
    if iso.jail is None:
        return Path(tempfile.gettempdir())
    base = iso.jail.root / jails.WORK.lstrip("/")
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if entry.stat(follow_symlinks=False).st_mtime < now - STALE:
                sweep.remove_tree(entry.path)
    return base


def _private_dir(base: Path, user: int | None) -> Path:
    work = Path(tempfile.mkdtemp(dir=base, prefix="run-"))
    (work / "tmp").mkdir()
    if user is not None:
        for path in (work, work / "tmp"):
            os.chown(path, user, user)
    work.chmod(0o700)
    return work


def _one_child(home: Path, base: Path, iso: Isolation, user: int | None, code: list[dict],
               notebook: bool, function: str, params: list[str], returns: list[str],
               cases: list[dict], runs: list[CaseRun], first: int, left: float) -> int:
    """One child from case `first` on; returns the first case left to run. Whatever it
    did, its processes, its directory and (a separate user's) files are gone after."""
    work = _private_dir(base, user)
    try:
        task = {"code": code, "notebook": notebook, "function": function, "params": params,
                "returns": returns, "cases": len(cases), "first": first}
        (work / "task.json").write_text(json.dumps(task), encoding="utf-8")
        np.savez(work / "inputs.npz", **{f"{k}/{p}": np.asarray(c[p]) for k, c in
                                         enumerate(cases) for p in params})
        shutil.copyfile(HARNESS, work / "harness.py")
        if user is not None:
            for name in ("task.json", "inputs.npz", "harness.py"):
                os.chown(work / name, user, user)
        out_path, err_path = home / f"out-{first}", home / f"err-{first}"
        events_r, events_w = os.pipe()
        argv, env, popen_user = _command(iso, user, work, _limits(left), events_w)
        with open(out_path, "wb") as out, open(err_path, "wb") as err, _not_dumpable():
            child = subprocess.Popen(
                argv, cwd="/" if iso.chroot else work, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, pass_fds=(events_w,), process_group=0,
                user=popen_user, group=popen_user, close_fds=True,
                extra_groups=[] if popen_user is not None else None)
            os.close(events_w)
            events = _watch(child, events_r, first, len(cases), left)
        _kill_group(child)
        os.close(events_r)
        if user is not None:
            sweep.reap(user)
        return _collect(work, events, out_path, err_path, runs, first, returns, left, user)
    finally:
        if user is not None:
            sweep.reap(user)
            sweep.remove_ipc_of(user)
            if not iso.chroot:
                _later(lambda: sweep.remove_files_of(user))
        _later(lambda: sweep.remove_tree(work))


def _command(iso: Isolation, user: int | None, work: Path, limits: dict[str, int],
             events_fd: int) -> tuple[list[str], dict[str, str], int | None]:
    """The child's command line, environment, and the user Popen switches to (None when
    ``chroot`` switches, or there is no other user)."""
    jail = iso.jail
    if jail is not None:
        def seen(path: str) -> str:
            return jail.inside(path, iso.chroot)
        where = seen(f"{jails.WORK}/{work.name}")
        python, numpy_dir = seen(jails.PYTHON), seen(jails.NUMPY)
        libs = {"LD_LIBRARY_PATH": seen(jails.LIBS)}
    else:
        where, python, numpy_dir, libs = str(work), os.path.realpath(sys.executable), \
            _numpy_dir(), {}
    env = {"PATH": "/usr/bin:/bin", "HOME": where, "TMPDIR": f"{where}/tmp",
           "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", **libs}
    argv = [python, "-I", "-S", f"{where}/harness.py", numpy_dir, json.dumps(limits),
            str(events_fd), where]
    enter = jails.chroot_argv(jail.root, user) if iso.chroot and jail is not None \
        and user is not None else None
    if enter is not None:
        return [*iso.netns, *enter, *argv], env, None
    return [*iso.netns, *argv], env, user


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
            k = int(number) if number.isdigit() and len(number) <= 9 else None
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


_MARK = re.compile(rb"\x1e(\d{1,9})\n")


def _outputs(path: Path, first: int, n: int) -> dict[int, str]:
    """The child's output split at the harness's case marks (``\x1eK``), each case's
    kept to `OUTPUT_PER_CASE` bytes (its start and its end); -1: before any case. Only a
    mark of a case after the last one counts (the harness's come once each, in order),
    so a flood of forged marks is text, and at most `n` + 1 pieces are made."""
    data = path.read_bytes()
    out: dict[int, bytes] = {}
    k, at = -1, 0
    for mark in _MARK.finditer(data):
        number = int(mark[1])
        if max(k, first - 1) < number < n:
            out[k] = data[at:mark.start()]
            k, at = number, mark.end()
    out[k] = data[at:]
    return {case: _clip(text) for case, text in out.items()}


def _clip(data: bytes) -> str:
    if len(data) > OUTPUT_PER_CASE:
        half = OUTPUT_PER_CASE // 2
        data = (data[:half] + f"\n[... {len(data) - OUTPUT_PER_CASE} bytes left out ...]\n"
                .encode() + data[-half:])
    return data.decode("utf-8", "replace")


def _collect(work: Path, events: list, out_path: Path, err_path: Path, runs: list[CaseRun],
             first: int, returns: list[str], left: float, user: int | None) -> int:
    """Each case's fate from the events and the answer files; the next case to run."""
    outs, errs = _outputs(out_path, first, len(runs)), _outputs(err_path, first, len(runs))
    if not any(kind == "ready" for kind, _, _ in events):
        # the student's code never ran: the harness's own start failed, or was too slow
        # with its whole start allowance (with less, the budget was used up before it)
        timed_out = bool(events) and events[-1][0] == "timeout"
        if timed_out and left < START_SHARE:
            for run in runs[first:]:
                run.error = run.error or ("not run: the submission's time was used up by"
                                          " the cases before")
            return len(runs)
        said = (errs.get(-1, "") + outs.get(-1, "")).strip()[-2000:]
        raise GraderError("the student's Python did not start"
                          + (f" within {left:g} s" if timed_out else "")
                          + (f": {said}" if said else ""))
    for k in range(first, len(runs)):
        runs[k].output = _join(outs.get(k, ""), errs.get(k, ""))
    preamble = _join(outs.get(-1, ""), errs.get(-1, ""))
    if preamble.strip() and first == 0 and runs:
        # the submission's top-level prints (and a notebook's failed cells), once: beside
        # the first case's own output
        runs[0].output = _clip(("printed while your code was loaded:\n" + preamble.rstrip()
                                + ("\n\nprinted in this case:\n" + runs[0].output
                                   if runs[0].output else "")).encode())
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
            runs[k].answers = _answers(work, k, returns, user)
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


def _answers(work: Path, k: int, returns: list[str], user: int | None
             ) -> dict[str, np.ndarray] | None:
    """Case `k`'s claimed arrays, read as data and only as data: ``answers/<k>.npz``
    opened without following a link at any step (the child owns that folder), a regular
    file with one name (not a hard link to another file), of the child's user, at most
    `FILE_SIZE` bytes, whose members are stored (not compressed: a small file cannot
    unpack into gigabytes) ``.npy`` arrays, loaded with ``allow_pickle=False``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        fds.append(os.open(work, flags | os.O_DIRECTORY))
        fds.append(os.open("answers", flags | os.O_DIRECTORY, dir_fd=fds[-1]))
        fds.append(os.open(f"{k}.npz", flags | os.O_NONBLOCK, dir_fd=fds[-1]))
        info = os.fstat(fds[-1])
        if (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1
                or info.st_size > FILE_SIZE or (user is not None and info.st_uid != user)):
            return None
        with os.fdopen(os.dup(fds[-1]), "rb") as f:
            data = f.read(FILE_SIZE + 1)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > len(returns) or any(
                    m.compress_type != zipfile.ZIP_STORED or m.file_size > FILE_SIZE
                    for m in members):
                return None
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {name: np.asarray(arrays[name], dtype=np.float64) for name in returns}
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError):
        return None
    finally:
        for fd in fds:
            os.close(fd)
