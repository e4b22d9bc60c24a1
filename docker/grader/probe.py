"""A submission that reports what the student's code can reach, graded like any other
(it scores 0): every readable Python file, compiled module, shared library or importable
archive on the file system it sees, counted by folder, and every way it knows to import
glassllm, torch or jax. Run by tests/course/test_grade_cheats.py on this machine and by
docker/grader/smoke.py in the built images; both check the report.

On its first case it prints one line, ``PROBE {json}``: ``uid``, ``cwd``, ``root`` (the
names in "/"), ``files`` (folder → count, a folder being the first three parts of the
file's directory; the child's own directory is ``<own>``) and ``imports`` (attempt →
"imported" or the error's name). The paths it guesses are those of the grader's own
machine and of the images: a student who has read the public repository and the
platforms' documentation knows them.
"""

import glob
import importlib.util
import json
import os
import re
import site
import sys
import zipimport

import numpy as np

GUESSES = [                      # where glassllm lives on a grader, as far as one can guess
    "/opt/venv/lib/python3.*/site-packages",
    "/opt/glassllm-grader/lib/python3.*/site-packages",
    "/usr/local/lib/python3.*/site-packages",
    "/usr/lib/python3/dist-packages",
    "/root/.pyenv/versions/*/lib/python3.*/site-packages",
    "/work/*", "/work/wt/*", "/work/*/.venv/lib/python3.*/site-packages",
    "/work/wt/*/.venv/lib/python3.*/site-packages",
]
EXTRA_GUESSES = []               # the test adds this machine's exact paths
SUFFIXES = (".py", ".pyc", ".so", ".whl", ".zip", ".egg", ".pth")
LIBRARY = re.compile(r"\.so(\.\d+)+$")          # libc.so.6, not ld.so.conf
_reported = []


def _walk() -> tuple[dict, list, list]:
    """One walk of the file system it sees: the readable files counted by folder, the
    folders named like a package directory, the wheels."""
    counts, sites, wheels = {}, [], []
    own = os.getcwd()
    seen = set()
    # its own directory too: a folder it may enter but not list (0711 /work) hides it
    for here, dirs, files in [*os.walk("/"), *os.walk(own)]:
        if here in seen or here in ("/proc", "/sys", "/dev"):
            dirs[:] = []
            continue
        seen.add(here)
        sites += [os.path.join(here, d) for d in dirs if d.endswith(("-packages", ".venv"))]
        for name in files:
            if not (name.endswith(SUFFIXES) or LIBRARY.search(name)):
                continue
            path = os.path.join(here, name)
            if os.path.islink(path) or not os.access(path, os.R_OK):
                continue
            if name.endswith(".whl"):
                wheels.append(path)
            key = "<own>" if path.startswith(own + "/") else "/".join(here.split("/")[:4])
            counts[key] = counts.get(key, 0) + 1
    return counts, sites, wheels


def _try(tried: dict, what: str, attempt) -> None:
    try:
        attempt()
        tried[what] = "imported"
    except BaseException as exc:
        tried[what] = type(exc).__name__


def _expand(patterns):
    found = []
    for pattern in patterns:
        found += glob.glob(pattern)
    return found


def _imports(found_sites: list, wheels: list) -> dict:
    tried = {}
    numpy_site = os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))
    sites = [*_expand(GUESSES + EXTRA_GUESSES), *found_sites, numpy_site, "/", os.getcwd()]
    procs = ["/proc/self/root", "/proc/1/root", f"/proc/{os.getppid()}/root",
             f"/proc/{os.getppid()}/cwd"]
    for name in ("glassllm", "torch", "jax"):
        _try(tried, f"import {name}", lambda n=name: __import__(n))
        for where in sites:
            def on_path(n=name, w=where):
                sys.path.insert(0, w)
                try:
                    __import__(n)
                finally:
                    sys.path.remove(w)
            _try(tried, f"sys.path {where}: {name}", on_path)
        _try(tried, f"site.addsitedir(numpy's real site-packages): {name}",
             lambda n=name: (site.addsitedir(numpy_site), __import__(n)))
        files = [os.path.join(w, name, "__init__.py") for w in sites]
        files += [p + os.path.join(w, name, "__init__.py") for p in procs for w in sites]
        for path in files:
            def from_file(n=name, p=path):
                spec = importlib.util.spec_from_file_location(n, p)
                if spec is None or spec.loader is None:
                    raise ImportError(p)
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            if os.path.exists(path) or path.startswith("/proc"):
                _try(tried, f"file {path}", from_file)
        for wheel in [*glob.glob(f"/autograder/source/wheels/{name}-*.whl"),
                      *(w for w in wheels if os.path.basename(w).startswith(name + "-"))]:
            def from_wheel(n=name, w=wheel):
                spec = zipimport.zipimporter(w).find_spec(n)
                if spec is None or spec.loader is None:
                    raise ImportError(w)
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            _try(tried, f"zipimport {wheel}", from_wheel)
    return tried


def _report() -> None:
    if _reported:
        return
    _reported.append(1)
    files, sites, wheels = _walk()
    print("PROBE " + json.dumps({"uid": os.getuid(), "cwd": os.getcwd(),
                                 "root": sorted(os.listdir("/")), "files": files,
                                 "imports": _imports(sites, wheels)}, sort_keys=True))


def softmax_backward(x, g):
    _report()
    return np.zeros_like(x)


def rms_norm_backward(x, weight, g):
    _report()
    return np.zeros_like(x), np.zeros_like(weight)
