"""The student's own Python: a private copy of this interpreter, its standard library and
NumPy, made once and kept, holding nothing else of this machine (docs/grading.md).

The grader runs the student's code as a user of its own; that user may run only what it
may read. A Python under ``/root`` (pyenv) is not readable by it, and a NumPy found
through the grader's site-packages leads back to everything installed there (glassllm,
torch: ``site.addsitedir(dirname(dirname(realpath(numpy.__file__))))``). So the child
runs a copy, laid out as the root of a file system of its own::

    usr/bin/pythonX.Y          the interpreter (a copy)
    usr/lib/pythonX.Y/         the standard library and its lib-dynload (copies; no
                               site-packages, no test suite, no bundled pip wheels)
    usr/lib/glassllm-child/    every shared library these need (copies; LD_LIBRARY_PATH)
    lib64/ld-linux-...so.2     the ELF interpreter, at the path the binaries name
    numpy/numpy, numpy.libs    NumPy (copies: nothing links back to site-packages)
    work/                      0711: each run's private directory, made and removed by
                               the runner
    READY                      0600, written last: what was copied, and from where

Where the grader is root and may ``chroot`` (CAP_SYS_CHROOT, in Docker's default set),
the child runs with this directory as its ``/``: the rest of the machine (other users'
checkouts, ``/proc``, ``/tmp``) does not exist for it. Elsewhere it runs the copy by its
path. Making it takes a few seconds and is done once per interpreter and NumPy (keyed by
their versions and paths), under ``$GLASSLLM_GRADER_CACHE``, else
``/var/cache/glassllm/grader`` for root, else ``~/.cache/glassllm/grader``; every
directory from ``/`` down to it must be the grader's own and not writable by others.
``glassllm grade --prepare`` makes it ahead (the images do, when they are built).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from glassllm.course.grader import sweep

__all__ = ["CACHE_ENV", "Jail", "JailError", "find_or_make"]

CACHE_ENV = "GLASSLLM_GRADER_CACHE"
VERSION = "{}.{}".format(*sys.version_info[:2])
PYTHON = f"/usr/bin/python{VERSION}"          # inside the jail
STDLIB = f"/usr/lib/python{VERSION}"
LIBS = "/usr/lib/glassllm-child"
NUMPY = "/numpy"
WORK = "/work"
# Parts of a standard library no grading needs, some large (the test suite, the static
# libpython), some importable archives or other packages (ensurepip's pip wheels)
SKIP_TOP = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo",
            "ensurepip", "__phello__", "lib2to3"}
LAYOUT = 1                                    # bump when the layout above changes


class JailError(RuntimeError):
    """The private Python could not be made or used here: the reason, for the log."""


@dataclass(frozen=True)
class Jail:
    """A made private Python (`find_or_make`): its root, and how it may be entered."""

    root: Path
    chroot: bool          # it ran NumPy with this directory as its root when it was made

    def inside(self, path: str, chrooted: bool) -> str:
        """`path` of the layout (``/numpy``) as the child sees it: itself when the child
        runs in the jail (`chrooted`), else the same file by its path on this machine."""
        return path if chrooted else str(self.root) + path


def _default_cache() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.geteuid() == 0:
        return Path("/var/cache/glassllm/grader")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "glassllm" / "grader"


def _sources() -> dict[str, str]:
    """Where this interpreter, its standard library and NumPy are."""
    lib_dynload = next((p for p in sys.path if p.rstrip("/").endswith("lib-dynload")), "")
    numpy_dir = Path(np.__file__).resolve().parent
    return {"python": os.path.realpath(sys.executable),
            "stdlib": os.path.realpath(os.path.dirname(os.__file__)),
            "lib_dynload": os.path.realpath(lib_dynload) if lib_dynload else "",
            "numpy": str(numpy_dir),
            "numpy_libs": str(numpy_dir.parent / "numpy.libs")
            if (numpy_dir.parent / "numpy.libs").is_dir() else ""}


def _key(src: dict[str, str]) -> str:
    stamp = [sys.version, np.__version__, LAYOUT]
    for name in ("python", "numpy"):
        info = os.stat(src[name] if name == "python" else Path(src[name]) / "__init__.py")
        stamp += [src[name], info.st_size, info.st_mtime_ns]
    digest = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16]
    return f"python{VERSION}-numpy{np.__version__}-{digest}"


def _safe_dir(path: Path) -> str | None:
    """Why `path` (an existing directory) could be changed by someone other than this
    user or root, or None: it and each directory above it must be owned by one of them
    and not writable by group or others (a sticky directory such as /tmp above it is
    allowed: no one else may rename what is ours in it)."""
    me = os.geteuid()
    current = path
    while True:
        try:
            info = os.lstat(current)
        except OSError as exc:
            return f"{current}: {exc.strerror}"
        if stat.S_ISLNK(info.st_mode):
            current = Path(os.path.realpath(current))
            continue
        if info.st_uid not in (0, me):
            return f"{current} is owned by uid {info.st_uid}"
        writable = info.st_mode & 0o022
        if writable and not (current != path and info.st_mode & stat.S_ISVTX):
            return f"{current} is writable by group or others (mode {info.st_mode & 0o7777:o})"
        if current.parent == current:
            return None
        current = current.parent


def _copy_tree(src: Path, dst: Path, skip_top: set[str], skip_any: set[str]) -> None:
    """Copy `src` into `dst`, files with their times (so compiled .pyc files stay valid),
    following a symbolic link only when it stays inside `src`."""
    root = os.path.realpath(src)
    for here, dirs, files in os.walk(src):
        rel = os.path.relpath(here, src)
        dirs[:] = [d for d in dirs if d not in skip_any
                   and not (rel == "." and (d in skip_top or d.startswith("config-")))]
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in list(files) + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            path = os.path.join(here, name)
            real = os.path.realpath(path)
            if os.path.commonpath([real, root]) != root or not os.path.isfile(real):
                continue             # a link out of the tree (Debian's sitecustomize)
            if (".opt-" in name and name.endswith(".pyc")) or name.startswith("_tkinter."):
                continue             # -O's caches (never run), Tk (no display, X11's libraries)
            shutil.copy2(real, dst / rel / name)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]


_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)\s+\(0x[0-9a-f]+\)\s*$")
_LDD_LOADER = re.compile(r"^\s*(/\S+)\s+\(0x[0-9a-f]+\)\s*$")


def _copy_libraries(root: Path) -> None:
    """Every shared library the interpreter, lib-dynload and NumPy's extensions load,
    found by ``ldd``, copied into `LIBS`; the ELF interpreter at its own path. NumPy's
    bundled libraries (``numpy.libs``) are found by their ``$ORIGIN`` path, already in
    the copy."""
    ldd = shutil.which("ldd")
    if ldd is None:
        raise JailError("no ldd on this machine: the shared libraries cannot be found")
    objects = [str(p) for p in root.rglob("*") if p.is_file() and
               (p.name.endswith(".so") or ".so." in p.name or p.parent.name == "bin")]
    done = subprocess.run([ldd, *objects], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    inside = str(root) + "/"
    libs = root / LIBS.lstrip("/")
    libs.mkdir(parents=True, exist_ok=True)
    for line in done.stdout.splitlines():
        if (m := _LDD_LINE.match(line)) is not None:
            name, path = m.groups()
            real = os.path.realpath(path)
            if not real.startswith(inside) and not (libs / name).exists():
                shutil.copy2(real, libs / name)
        elif (m := _LDD_LOADER.match(line)) is not None and not (root / m[1][1:]).exists():
            (root / m[1][1:]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(m[1]), root / m[1][1:])


def _normalize(root: Path) -> None:
    """Root's, readable by all, writable by none but root: directories 0755, programs and
    libraries 0755, other files 0644; `WORK` 0711 (each run's directory is private)."""
    for here, _dirs, files in os.walk(root):
        os.chmod(here, 0o755)
        for name in files:
            path = os.path.join(here, name)
            mode = os.lstat(path).st_mode
            os.chmod(path, 0o755 if mode & 0o111 else 0o644)
    (root / WORK.lstrip("/")).mkdir(exist_ok=True)
    os.chmod(root / WORK.lstrip("/"), 0o711)


PROBE = ("import sys; sys.path.append(sys.argv[1]); import numpy, ctypes, json, zipfile;"
         " print(numpy.__version__)")


def probe_env(jail_libs: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LD_LIBRARY_PATH": jail_libs,
            "OPENBLAS_NUM_THREADS": "1"}


def _runs_numpy(argv: list[str], env: dict[str, str], user: int | None) -> str:
    """'' when `argv` (the probe) printed this NumPy's version, else what it said."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                              cwd="/", user=user, group=user,
                              extra_groups=[] if user is not None else None)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0 and done.stdout.strip() == np.__version__:
        return ""
    return (done.stderr or done.stdout).strip()[-500:] or f"exit status {done.returncode}"


def chroot_argv(root: Path, uid: int) -> list[str] | None:
    """The command prefix entering `root` as `uid` (its own group, no other), or None
    when there is no ``chroot`` program."""
    program = shutil.which("chroot") or next(
        (p for p in ("/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot")
         if os.access(p, os.X_OK)), None)
    if program is None:
        return None
    return [program, f"--userspec={uid}:{uid}", f"--groups={uid}", str(root)]


@functools.cache
def probe_uid() -> int:
    """An id no one has, for the probes (within this user namespace's map)."""
    return sweep.fresh_id()


def _check(root: Path) -> bool:
    """Does the made copy run NumPy: entered (chroot) where this grader may, else by its
    path as another user (root), else as this one. Raises JailError when it does not."""
    if os.geteuid() == 0:
        prefix = chroot_argv(root, probe_uid())
        if prefix is not None and not _runs_numpy(
                [*prefix, PYTHON, "-I", "-S", "-c", PROBE, NUMPY], probe_env(LIBS), None):
            return True
    user = probe_uid() if os.geteuid() == 0 else None
    said = _runs_numpy([str(root) + PYTHON, "-I", "-S", "-c", PROBE, str(root) + NUMPY],
                       probe_env(str(root) + LIBS), user)
    if said:
        raise JailError(f"the private Python made in {root} does not run NumPy: {said}")
    return False


def _make(cache: Path, key: str, src: dict[str, str]) -> Path:
    building = Path(tempfile.mkdtemp(dir=cache, prefix=".making-"))
    try:
        os.chmod(building, 0o755)
        python = building / PYTHON.lstrip("/")
        python.parent.mkdir(parents=True)
        shutil.copy2(src["python"], python)
        stdlib = building / STDLIB.lstrip("/")
        _copy_tree(Path(src["stdlib"]), stdlib, SKIP_TOP, set())
        if src["lib_dynload"] and not (stdlib / "lib-dynload").is_dir():
            _copy_tree(Path(src["lib_dynload"]), stdlib / "lib-dynload", set(), set())
        _copy_tree(Path(src["numpy"]), building / "numpy" / "numpy", set(), {"tests"})
        if src["numpy_libs"]:
            _copy_tree(Path(src["numpy_libs"]), building / "numpy" / "numpy.libs", set(), set())
        _copy_libraries(building)
        _normalize(building)
        chroot = _check(building)
        (building / "READY").write_text(json.dumps(
            {"key": key, "from": src, "numpy": np.__version__, "python": sys.version,
             "chroot": chroot}, indent=1) + "\n", encoding="utf-8")
        os.chmod(building / "READY", 0o600)    # the grader's: it names this machine's paths
        final = cache / key
        try:
            os.rename(building, final)
        except OSError:
            if not (final / "READY").is_file():   # another grader's is complete, or not
                raise
        return final
    finally:
        shutil.rmtree(building, ignore_errors=True)


@functools.cache
def find_or_make(cache: Path | None = None) -> Jail:
    """The private Python of this interpreter and NumPy, made now if it is not yet;
    raises `JailError` (the reason) where it cannot be made or used."""
    cache = cache or _default_cache()
    try:
        src = _sources()
        key = _key(src)
        cache.mkdir(parents=True, exist_ok=True, mode=0o755)
    except OSError as exc:
        raise JailError(f"cannot make {cache}: {exc.strerror}") from None
    unsafe = _safe_dir(cache)
    if unsafe:
        raise JailError(f"{cache} is not safe for the private Python: {unsafe}")
    final = cache / key
    if not (final / "READY").is_file():
        try:
            final = _make(cache, key, src)
        except OSError as exc:
            raise JailError(f"cannot make the private Python in {cache}: {exc}") from None
    try:
        ready = json.loads((final / "READY").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JailError(f"{final}/READY cannot be read: {exc}") from None
    unsafe = _safe_dir(final)
    if unsafe:
        raise JailError(f"{final} is not safe: {unsafe}")
    return Jail(final, bool(ready.get("chroot")))
