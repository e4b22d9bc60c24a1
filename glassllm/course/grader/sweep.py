"""A user of its own for each run of student code, and what that user leaves removed
after it: its processes, its files in the shared writable directories, its System V IPC
objects (docs/grading.md).

The id is fresh (never a user of this machine, never one another run holds), so "every
process and file of this user" is exactly what the student's code made: a daemon forked
to rewrite the results after the grader is killed with the rest, whatever its process
group or session.
"""

from __future__ import annotations

import contextlib
import ctypes
import grp
import os
import pwd
import secrets
import signal
import stat
import tempfile
import time

__all__ = [
    "SHARED_DIRS",
    "fresh_id",
    "processes_of",
    "reap",
    "remove_files_of",
    "remove_ipc_of",
    "remove_tree",
]

SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/run/lock", "/var/lock",
               "/dev/mqueue")
BAND = (0x4000_0000, 0x7FFF_0000)     # ids no distribution gives to a user


def _mapped(path: str) -> list[tuple[int, int]]:
    """The ids this process may switch to: its user namespace's map (all of them in the
    first namespace), as [start, end) ranges."""
    try:
        with open(path, encoding="ascii") as f:
            rows = [line.split() for line in f if line.strip()]
    except OSError:
        return [(0, 1 << 32)]
    return [(int(r[0]), int(r[0]) + int(r[2])) for r in rows if len(r) == 3]


def _band() -> tuple[int, int]:
    ranges = [(max(a, c), min(b, d)) for a, b in _mapped("/proc/self/uid_map")
              for c, d in _mapped("/proc/self/gid_map") if max(a, c) < min(b, d)]
    inside = [(max(a, BAND[0]), min(b, BAND[1])) for a, b in ranges
              if max(a, BAND[0]) < min(b, BAND[1])]
    if inside:
        return max(inside, key=lambda r: r[1] - r[0])
    # a small namespace (rootless containers map 65536 ids): ids above the system's and
    # the users' usual ones, short of nobody (65534)
    small = []
    for a, b in ranges:
        low = max(a, 100_000) if b - max(a, 100_000) >= 1024 else max(a, 2000)
        high = b if low >= 100_000 else min(b, 65_534)
        if high - low >= 64:
            small.append((low, high))
    if not small:
        raise OSError("no free user ids to switch to in this user namespace")
    return max(small, key=lambda r: r[1] - r[0])


def fresh_id() -> int:
    """A user (and group) id no account of this machine has and no process holds."""
    low, high = _band()
    for _ in range(100):
        uid = low + secrets.randbelow(high - low)
        if _named(pwd.getpwuid, uid) or _named(grp.getgrgid, uid):
            continue
        if not processes_of(uid):
            return uid
    raise OSError("no free user id found")


def _named(lookup, number: int) -> bool:
    try:
        lookup(number)
    except KeyError:
        return False
    return True


def processes_of(uid: int) -> list[int]:
    """Every live (not zombie) process with `uid` as its real, effective, saved or file
    system user id, read from /proc's ``status`` (right even for a process that made
    itself undumpable, whose /proc entry root then owns)."""
    found = []
    want = str(uid).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                text = f.read(4096)
        except OSError:
            continue
        fields = dict(line.split(b":", 1) for line in text.splitlines() if b":" in line)
        if fields.get(b"State", b"").strip().startswith(b"Z"):
            continue
        if want in fields.get(b"Uid", b"").split():
            found.append(int(name))
    return found


def reap(uid: int, rounds: int = 200) -> int:
    """SIGKILL every process of `uid` until none is left; how many were killed. A
    process of it may fork between two looks, so it looks again until one finds none."""
    killed = 0
    for _ in range(rounds):
        pids = processes_of(uid)
        if not pids:
            return killed
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.005)
    raise OSError(f"the processes of user {uid} could not all be killed")


def remove_files_of(uid: int, dirs: tuple[str, ...] = SHARED_DIRS, depth: int = 3) -> int:
    """Remove every entry `uid` owns in the world-writable directories `dirs` (and the
    world-writable directories in them, `depth` deep), never following a link; how many
    were removed."""
    removed = 0
    roots = {os.path.realpath(d) for d in (*dirs, tempfile.gettempdir())}
    for root in sorted(roots):
        removed += _remove_in(root, uid, depth)
    return removed


def _remove_in(folder: str, uid: int, depth: int) -> int:
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            if stat.S_ISDIR(info.st_mode):
                remove_tree(entry.path)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            removed += 1
        elif (depth > 1 and stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002):
            removed += _remove_in(entry.path, uid, depth - 1)
    return removed


def remove_tree(path: str | os.PathLike) -> None:
    """Remove the directory `path` and all in it, never following a link, however deep
    it is nested: a tree of 100 000 directories one inside the other defeats a recursive
    removal (Python's stack) and any removal by path (PATH_MAX), so each directory's
    subdirectories are first moved up beside it, and only then is it emptied; no path is
    ever more than two names long. What cannot be removed is left, never raised."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    tag = secrets.token_hex(8)
    moved = 0
    try:
        top = os.open(path, flags)
    except OSError:
        return
    try:
        while True:
            with os.scandir(top) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            if not entries:
                break
            progress = False
            for name, is_dir in entries:
                with contextlib.suppress(OSError):
                    if not is_dir:
                        os.unlink(name, dir_fd=top)
                        progress = True
                        continue
                    inner = os.open(name, flags, dir_fd=top)
                    try:
                        with os.scandir(inner) as it:
                            below = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                        for sub, sub_is_dir in below:
                            if sub_is_dir:
                                moved += 1
                                os.rename(sub, f".up-{tag}-{moved}", src_dir_fd=inner,
                                          dst_dir_fd=top)
                            else:
                                os.unlink(sub, dir_fd=inner)
                    finally:
                        os.close(inner)
                    os.rmdir(name, dir_fd=top)
                    progress = True
            if not progress:
                return
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def remove_ipc_of(uid: int) -> int:
    """Remove the System V shared memory segments, message queues and semaphore sets
    `uid` owns or made (they outlive processes); how many were removed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    ipc_rmid = 0
    removed = 0
    for kind, id_name, remove in (
            ("shm", b"shmid", lambda i: libc.shmctl(i, ipc_rmid, None)),
            ("msg", b"msqid", lambda i: libc.msgctl(i, ipc_rmid, None)),
            ("sem", b"semid", lambda i: libc.semctl(i, 0, ipc_rmid))):
        try:
            with open(f"/proc/sysvipc/{kind}", "rb") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        head = lines[0].split()
        try:
            col, uid_col, cuid_col = (head.index(id_name), head.index(b"uid"),
                                      head.index(b"cuid"))
        except ValueError:
            continue
        for line in lines[1:]:
            fields = line.split()
            if len(fields) > max(col, uid_col, cuid_col) and uid in (
                    int(fields[uid_col]), int(fields[cuid_col])):
                removed += remove(int(fields[col])) == 0
    return removed
