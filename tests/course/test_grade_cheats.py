"""Cheats score nothing for the cheat: each submission below tries one way around the
grader and returns the right answer only if that way worked (else zeros). The grader runs
as a course's grader does, `glassllm grade ... --results FILE` in a process of its own,
with the exercise file at mode 0600, the salt in its environment and in a 0600 file
beside the exercise (docs/grading.md, docs/integrity.md). Each cheat knows this
machine's exact paths (the results file, the exercise, the salt file, the grader's
site-packages): the strongest student, who has guessed them all.

As root (this machine, the images) the separate user and the file-system jail must be
on, whatever the host: the grader makes its private Python when it has none. Where the
grader is not root, the tests of what only those give skip, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

import glassllm
from glassllm.course.exercise import SHIPPED
from glassllm.course.grader import jail, runner, sweep

SALT = "s3cret-course-salt"
ROOTED = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOTED, reason="the grader is not root here: the"
                                " separate user and the file-system jail are off")
GRADER_SITE = str(Path(np.__file__).resolve().parent.parent)
HEAD = '''
import ctypes, errno, json, os, signal, sys
import numpy as np

RESULTS = {results!r}
EXERCISE = {exercise!r}
SALT_FILE = {salt_file!r}
GRADER_SITE = {site!r}
GLASSLLM = {glassllm!r}
print("uid", os.getuid())

def zeros(x, weight, g):
    return np.zeros_like(x), np.zeros_like(weight)

def right(x, weight, g):
    d = x.shape[-1]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    gw = g * weight
    return (gw * r - x * r**3 * np.sum(gw * x, axis=-1, keepdims=True) / d,
            np.sum(g * x * r, axis=tuple(range(x.ndim - 1))))

def attempt(what, action):
    try:
        action()
    except BaseException as exc:
        print(what, "denied", type(exc).__name__)
        return False
    print(what, "WORKED")
    return True

def libc_call(name, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) == -1:
        raise OSError(ctypes.get_errno(), errno.errorcode.get(ctypes.get_errno(), "?"))
'''
CHEATS = {
    "reading the exercise file": '''
def rms_norm_backward(x, weight, g):
    if attempt("the exercise file", lambda: open(EXERCISE).read()):
        return right(x, weight, g)
    return zeros(x, weight, g)
''',
    "reading the salt": '''
def rms_norm_backward(x, weight, g):
    ppid = os.getppid()
    for what, path in (("the salt file", SALT_FILE), ("the parent's environ",
                       f"/proc/{ppid}/environ"), ("the parent's cmdline",
                       f"/proc/{ppid}/cmdline"), ("pid 1's environ", "/proc/1/environ")):
        if attempt(what, lambda p=path: print(open(p, "rb").read()[:4000])):
            return right(x, weight, g)
    print("own environment", dict(os.environ))
    return zeros(x, weight, g)
''',
    "reading the parent's /proc": '''
def rms_norm_backward(x, weight, g):
    p = f"/proc/{os.getppid()}"
    worked = [attempt("environ", lambda: open(p + "/environ", "rb").read()),
              attempt("cmdline", lambda: open(p + "/cmdline", "rb").read()),
              attempt("fd", lambda: print(os.listdir(p + "/fd"))),
              attempt("maps", lambda: open(p + "/maps", "rb").read()),
              attempt("mem", lambda: open(p + "/mem", "rb").read(1)),
              attempt("cwd", lambda: os.listdir(p + "/cwd")),
              attempt("root", lambda: os.listdir(p + "/root"))]
    return right(x, weight, g) if any(worked) else zeros(x, weight, g)
''',
    "ptrace of the grader": '''
def rms_norm_backward(x, weight, g):
    ppid = os.getppid()
    worked = [attempt("ptrace attach", lambda: libc_call("ptrace", 16, ppid, 0, 0)),
              attempt("ptrace seize", lambda: libc_call("ptrace", 0x4206, ppid, 0, 0))]
    buf = ctypes.create_string_buffer(64)
    class IOVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    local, remote = IOVec(ctypes.addressof(buf), 64), IOVec(0x400000, 64)
    worked.append(attempt("process_vm_readv", lambda: libc_call(
        "process_vm_readv", ppid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)))
    return right(x, weight, g) if any(worked) else zeros(x, weight, g)
''',
    "signalling the grader": '''
def rms_norm_backward(x, weight, g):
    ppid = os.getppid()
    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
        attempt(f"kill {sig.name}", lambda s=sig: os.kill(ppid, s))
    attempt("killpg", lambda: os.killpg(os.getpgid(ppid), signal.SIGTERM))
    attempt("kill pid 1", lambda: os.kill(1, signal.SIGTERM))
    return zeros(x, weight, g)
''',
    "import glassllm to call backward": '''
def rms_norm_backward(x, weight, g):
    if attempt("import glassllm", lambda: __import__("glassllm")):
        return right(x, weight, g)
    sys.path.append(os.path.dirname(os.path.dirname(os.path.realpath(np.__file__))))
    if attempt("import glassllm beside NumPy", lambda: __import__("glassllm")):
        return right(x, weight, g)
    sys.path.append(GRADER_SITE)
    sys.path.append(os.path.dirname(os.path.dirname(GLASSLLM)))
    if attempt("import glassllm from its path", lambda: __import__("glassllm")):
        return right(x, weight, g)
    return zeros(x, weight, g)
''',
    "printing a fake results JSON": '''
print(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
def rms_norm_backward(x, weight, g):
    print(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
    return zeros(x, weight, g)
''',
    "writing the results file": '''
FAKE = json.dumps({"exercise": "rmsnorm-backward", "score": 10.0, "max_score": 10.0,
                   "tests": []})
def rms_norm_backward(x, weight, g):
    attempt("the results file", lambda: open(RESULTS, "w").write(FAKE))
    attempt("a new file in the results folder", lambda: open(
        os.path.join(os.path.dirname(RESULTS), "x.json"), "w").write(FAKE))
    return zeros(x, weight, g)
''',
    "links into the results folder": '''
def rms_norm_backward(x, weight, g):
    with open("fake.json", "w") as f:
        f.write(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
    folder = os.path.dirname(RESULTS)
    attempt("a symlink in the results folder", lambda: os.symlink(
        os.path.abspath("fake.json"), os.path.join(folder, "link.json")))
    attempt("a hard link in the results folder", lambda: os.link(
        "fake.json", os.path.join(folder, "hard.json")))
    os.rename("answers", "answers-old")          # its own folder: it may; the grader
    os.symlink(folder, "answers")                # reads through no link
    return right(x, weight, g)
''',
    "hard links and FIFOs as answers files": '''
calls = []
def rms_norm_backward(x, weight, g):
    calls.append(1)
    if len(calls) == 3:          # the first two answers are written: replace them
        os.link("answers/0.npz", "answers/0-again.npz")     # two names: not its own
        os.unlink("answers/1.npz")
        os.mkfifo("answers/1.npz")    # a reader of a FIFO waits for a writer, forever
    return right(x, weight, g) if len(calls) < 3 else zeros(x, weight, g)
''',
    "compressed answers (a zip bomb)": '''
np.savez = np.savez_compressed   # the harness writes its answers with np.savez
def rms_norm_backward(x, weight, g):
    return right(x, weight, g)
''',
    "forging the harness's events": '''
def rms_norm_backward(x, weight, g):
    fd = int(sys.argv[3])
    os.write(fd, b"done 0\\ndone 1\\ndone 2\\n")
    os._exit(0)
''',
    "writing into site-packages": '''
def rms_norm_backward(x, weight, g):
    here = os.path.dirname(os.__file__)
    for what, path in (("the grader's site-packages", GRADER_SITE + "/sitecustomize.py"),
                       ("a .pth", GRADER_SITE + "/zz-cheat.pth"),
                       ("the child's NumPy", os.path.dirname(np.__file__) + "/cheat.py"),
                       ("the child's stdlib", here + "/sitecustomize.py"),
                       ("glassllm", os.path.dirname(GLASSLLM) + "/cheat.py")):
        attempt(what, lambda p=path: open(p, "w").write("import os\\n"))
    return zeros(x, weight, g)
''',
    "leaving files and IPC for later": '''
def rms_norm_backward(x, weight, g):
    tmpdir = os.environ["TMPDIR"]
    with open(os.path.join(tmpdir, "left-behind"), "w") as f:
        f.write("its own, removed after the run")
    print("tmpdir", tmpdir, "written")
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        attempt(f"a file in {folder}", lambda f=folder: open(
            os.path.join(f, "left-behind"), "w").write("for the next run"))
    libc = ctypes.CDLL(None, use_errno=True)
    shm = libc.shmget(0, 4096, 0o1000 | 0o666)          # IPC_PRIVATE, IPC_CREAT
    print("shm", shm)
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
import subprocess
def rms_norm_backward(x, weight, g):
    def daemon():
        if os.fork() == 0:
            os.setsid()
            import time
            time.sleep(1.0)
            with open(RESULTS, "w") as f:
                f.write(json.dumps({"score": 10.0, "max_score": 10.0, "tests": []}))
            os._exit(0)
    attempt("fork", daemon)
    attempt("subprocess", lambda: subprocess.Popen([sys.executable, "-c", "pass"]))
    attempt("posix_spawn", lambda: os.posix_spawn(sys.executable, [sys.executable], {}))
    return zeros(x, weight, g)
''',
}
# what each cheat must have been told (its attempts denied), where the protections are on
DENIED = {
    "reading the exercise file": ["the exercise file denied"],
    "reading the salt": ["the salt file denied", "the parent's environ denied",
                         "the parent's cmdline denied", "pid 1's environ denied"],
    "reading the parent's /proc": [f"{n} denied" for n in ("environ", "cmdline", "fd",
                                                           "maps", "mem", "cwd", "root")],
    "ptrace of the grader": ["ptrace attach denied", "ptrace seize denied",
                             "process_vm_readv denied"],
    "signalling the grader": ["kill SIGSTOP denied", "kill SIGTERM denied",
                              "kill SIGKILL denied", "killpg denied", "kill pid 1 denied"],
    "import glassllm to call backward": ["import glassllm denied ModuleNotFoundError",
                                         "import glassllm beside NumPy denied",
                                         "import glassllm from its path denied"],
    "writing the results file": ["the results file denied",
                                 "a new file in the results folder denied"],
    "links into the results folder": ["a symlink in the results folder denied",
                                      "a hard link in the results folder denied"],
    "writing into site-packages": [f"{n} denied" for n in (
        "the grader's site-packages", "a .pth", "the child's NumPy", "the child's stdlib",
        "glassllm")],
    "leaving files and IPC for later": ["a file in /tmp denied", "a file in /var/tmp denied",
                                        "a file in /dev/shm denied"],
    "a forked daemon rewriting the results after the grader": [
        "fork denied BlockingIOError", "subprocess denied BlockingIOError",
        "posix_spawn denied BlockingIOError"],
}


@pytest.fixture(scope="module")
def grader_dir(tmp_path_factory):
    """The grader's files as a course's image holds them: the exercise and the salt
    file at 0600, the results folder not writable by the student's user."""
    home = tmp_path_factory.mktemp("grader")
    home.chmod(0o700)
    exercise = home / "exercise.toml"
    shutil.copyfile(SHIPPED / "rmsnorm-backward.toml", exercise)
    exercise.chmod(0o600)
    (home / "salt").write_text(SALT)
    (home / "salt").chmod(0o600)
    return home


def _grade(grader_dir: Path, tmp_path: Path, source: str, tag: str,
           time_limit: str = "10") -> tuple[dict, str, subprocess.CompletedProcess]:
    results = grader_dir / f"results-{tag}" / "results.json"
    results.parent.mkdir(exist_ok=True)
    sub = tmp_path / "submission.py"
    sub.write_text(HEAD.format(results=str(results), exercise=str(grader_dir / "exercise.toml"),
                               salt_file=str(grader_dir / "salt"), site=GRADER_SITE,
                               glassllm=glassllm.__file__) + source)
    sub.chmod(0o644)
    env = {**os.environ, "GLASSLLM_COURSE_SALT": SALT}
    done = subprocess.run([sys.executable, "-m", "glassllm.apps.cli", "grade",
                           str(grader_dir / "exercise.toml"), str(sub), "--student", "ada",
                           "--format", "json", "--results", str(results),
                           "--time-limit", time_limit], env=env, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    text = results.read_text()
    return json.loads(text), text, done


def _child_uid(said: str) -> int | None:
    found = re.search(r"^uid (\d+)", said, re.MULTILINE)
    return int(found[1]) if found else None


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_each_cheat_scores_nothing(grader_dir, tmp_path, cheat):
    report, text, _ = _grade(grader_dir, tmp_path, CHEATS[cheat],
                                f"{len(cheat)}-{cheat[:5].replace(' ', '_')}")
    assert report["exercise"] == "rmsnorm-backward" and len(report["tests"]) == 3
    assert (report["score"], report["max_score"]) == (0.0, 10.0)
    assert report["graded"] is True
    assert SALT not in text and str(grader_dir) not in text
    said = "\n".join(t["output"] + t["message"] for t in report["tests"])
    assert "WORKED" not in said
    if not ROOTED:
        pytest.skip("the grader is not root here: only the score is checked (the separate"
                    " user and the jail are off; stderr says so)")
    iso = runner.isolation()
    assert iso.separate and iso.chroot, iso.off
    for words in DENIED.get(cheat, []):
        assert words in said, (words, said)
    uid = _child_uid(said)
    if cheat not in ("sys.exit(0) early", "os._exit(0) early"):
        assert uid is not None and uid != 0 and uid >= sweep.BAND[0], said
    if uid is not None:              # nothing of the child's user outlives the run
        assert sweep.processes_of(uid) == []
        assert all(_owned(uid, d) == [] for d in ("/tmp", "/var/tmp", "/dev/shm"))
        assert str(uid) not in _sysv_owners()
    if "early" in cheat:
        assert all(t["message"].startswith("0 points: ") for t in report["tests"])
    if cheat == "forging the harness's events":
        assert all("its answers could not be read" in t["message"] for t in report["tests"])
    if cheat == "hard links and FIFOs as answers files":
        assert [t["score"] for t in report["tests"]] == [0.0, 0.0, 0.0]
        assert "its answers could not be read" in report["tests"][0]["message"]
    if cheat == "compressed answers (a zip bomb)":
        assert all("its answers could not be read" in t["message"] for t in report["tests"])
    if cheat == "leaving files and IPC for later":
        tmpdir = next(line.split()[1] for line in said.splitlines()
                      if line.startswith("tmpdir "))
        assert f"tmpdir {tmpdir} written" in said       # its own, removed after:
        assert not Path(str(iso.jail.root) + tmpdir).exists()
        assert not (Path(str(iso.jail.root) + tmpdir).parent).exists()
    folder = grader_dir / f"results-{len(cheat)}-{cheat[:5].replace(' ', '_')}"
    assert sorted(p.name for p in folder.iterdir()) == ["results.json"]
    assert not Path(GRADER_SITE, "sitecustomize.py").exists()
    assert not Path(GRADER_SITE, "zz-cheat.pth").exists()


def _owned(uid: int, folder: str) -> list[str]:
    try:
        return [e.path for e in os.scandir(folder) if e.stat(follow_symlinks=False).st_uid
                == uid]
    except OSError:
        return []


def _sysv_owners() -> str:
    try:
        return Path("/proc/sysvipc/shm").read_text()
    except OSError:
        return ""


def _probe_source() -> str:
    source = (ROOT / "docker/grader/probe.py").read_text()
    here = [GRADER_SITE, str(Path(glassllm.__file__).parent.parent), sys.prefix,
            sys.base_prefix, str(ROOT)]
    return source.replace("EXTRA_GUESSES = []", f"EXTRA_GUESSES = {here!r}")


@needs_root
def test_the_child_reads_only_the_stdlib_its_numpy_and_its_own_directory(tmp_path):
    """Run as the child's user, in its jail: every readable Python file, compiled module,
    shared library or archive is in the private Python (its standard library, its NumPy
    copy, their libraries) or the child's own directory, and glassllm, torch and jax
    import by no path (sys.path edits, NumPy's real path, site dirs, a file path, a
    wheel, /proc/self, /proc/<parent>)."""
    from glassllm.course.grader import grade_submission

    sub = tmp_path / "probe.py"
    sub.write_text(_probe_source())
    report = grade_submission(SHIPPED / "rmsnorm-backward.toml", sub, "ada", budget=20)
    assert report.score == 0.0
    line = next(x for x in report.tests[0].output.splitlines() if x.startswith("PROBE "))
    probe = json.loads(line[len("PROBE "):])
    iso = runner.isolation()
    assert probe["uid"] >= sweep.BAND[0] and probe["cwd"].startswith("/work/run-")
    assert probe["root"] == ["READY", "lib64", "numpy", "usr", "work"]
    version = jail.VERSION
    allowed = (f"/usr/lib/python{version}", "/usr/lib/glassllm-child", "/numpy/numpy",
               "/numpy/numpy.libs", "/lib64")
    files = probe["files"]
    outside = [k for k in files if k != "<own>" and not any(
        k == a or k.startswith(a + "/") for a in allowed)]
    assert outside == []
    assert sum(n for k, n in files.items() if k.startswith(allowed[0])) > 500  # stdlib
    assert sum(n for k, n in files.items() if k.startswith("/numpy/numpy")) > 100
    assert files["<own>"] == 1                                 # its harness.py
    imported = [k for k, v in probe["imports"].items() if v == "imported"]
    assert imported == []
    assert len(probe["imports"]) >= 3 * 10                       # every path was tried
    assert probe["imports"]["import glassllm"] == "ModuleNotFoundError"
    assert iso.chroot


@needs_root
def test_the_private_python_is_copies_owned_by_root_made_once():
    """The private Python: copies (no link leaves it), owned by root, written by no one
    else, with no site-packages and nothing of glassllm; its READY (this machine's
    paths) readable by root only; made once (the same directory every time)."""
    made = jail.find_or_make()
    assert made == jail.find_or_make() and made.chroot
    root = made.root
    assert (root / "READY").stat().st_mode & 0o777 == 0o600
    assert (root / "work").stat().st_mode & 0o777 == 0o711
    names = set()
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here, name)
            info = path.lstat()
            assert not path.is_symlink(), path
            assert info.st_uid == 0 and info.st_mode & 0o022 == 0, path
            names.add(name)
    assert not names & {"site-packages", "dist-packages", "glassllm", "torch", "jax",
                        "ensurepip", "idlelib"}
    assert not (root / "usr/lib" / f"python{jail.VERSION}" / "test").exists()
    real_numpy = Path(np.__file__).resolve().parent
    copy = root / "numpy" / "numpy" / "__init__.py"
    assert copy.read_bytes() == (real_numpy / "__init__.py").read_bytes()
    assert copy.stat().st_ino != (real_numpy / "__init__.py").stat().st_ino


def test_the_child_has_only_numpy_and_no_setting_of_the_grader(tmp_path, monkeypatch):
    from glassllm.course.grader import grade_submission

    monkeypatch.setenv("GLASSLLM_COURSE_SALT", SALT)
    sub = tmp_path / "probe.py"
    sub.write_text('''
import importlib.util, os, resource
import numpy as np
def rms_norm_backward(x, weight, g):
    print("env", sorted(os.environ))
    print("cwd", sorted(os.listdir(".")))
    print("mods", [m for m in ("torch", "glassllm", "pytest", "fastapi", "jsonschema")
                   if importlib.util.find_spec(m)])
    print("limits", [resource.getrlimit(getattr(resource, "RLIMIT_" + n))[1]
                     for n in ("NPROC", "NOFILE", "CORE")])
    print("uid", os.getuid(), os.geteuid(), os.getgroups())
    return np.zeros_like(x), np.zeros_like(weight)
''')
    report = grade_submission(SHIPPED / "rmsnorm-backward.toml", sub, "ada", budget=10)
    out = report.tests[0].output
    assert "env ['HOME', 'LANG', 'LD_LIBRARY_PATH', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS'," \
           " 'OPENBLAS_NUM_THREADS', 'PATH', 'TMPDIR']" in out
    assert "cwd ['answers', 'harness.py', 'inputs.npz', 'task.json', 'tmp']" in out
    assert "mods []" in out and "limits [0, 64, 0]" in out
    assert SALT not in out
    if ROOTED:
        uid = _child_uid(out)
        assert uid is not None and uid >= sweep.BAND[0]
        assert f"uid {uid} {uid} [{uid}]" in out


@pytest.mark.parametrize("platform", ["prairielearn", "gradescope"])
def test_a_platforms_folder_is_closed_before_the_students_code_runs(tmp_path, platform):
    """`--platform` closes the job's folder (/grade, /autograder: 0700) and the exercise
    (0600) first, so even a child that could see this file system reads nothing there:
    not the exercise, the salt, the data, another file of the submission, the results."""
    from glassllm.apps.cli import main

    top = tmp_path / ("grade" if platform == "prairielearn" else "autograder")
    tests = top / ("tests" if platform == "prairielearn" else "source")
    student = top / ("student" if platform == "prairielearn" else "submission")
    for folder in (tests, student):
        folder.mkdir(parents=True)
    top.chmod(0o755)
    shutil.copyfile(ROOT / "examples" / "softmax-backward.toml", tests / "ex.toml")
    (tests / "ex.toml").chmod(0o644)
    shutil.copyfile(ROOT / "examples" / "student_softmax.py", student / "answer.py")
    # who the student is, the course's salt and roster, where each platform keeps them
    if platform == "prairielearn":
        (top / "data").mkdir()
        (top / "data" / "data.json").write_text(json.dumps({"params": {"student": "ada"}}))
        course = top / "serverFilesCourse" / "glassllm"
        course.mkdir(parents=True)
    else:
        (top / "submission_metadata.json").write_text(json.dumps(
            {"users": [{"email": "ada@example.edu", "id": 1, "name": "Ada"}]}))
        course = tests
    (course / "salt").write_text("a-course-salt\n")
    (course / "roster.csv").write_text("student_id,email\nada,ada@example.edu\n")
    assert main(["grade", "--platform", platform, "--root", str(tmp_path)]) == 0
    assert top.stat().st_mode & 0o777 == 0o700
    assert (tests / "ex.toml").stat().st_mode & 0o777 == 0o600
    results = json.loads((top / "results" / "results.json").read_text())
    assert results["score"] == (1.0 if platform == "prairielearn" else 8.0)


def test_each_run_gets_a_user_id_no_account_or_process_has(monkeypatch):
    """The child's id: from a band no distribution gives out, within this user
    namespace's map; in a rootless container's 65536 ids, above the usual users' and
    short of nobody's; never an account's, never a live process's."""
    import pwd

    ids = {sweep.fresh_id() for _ in range(20)}
    assert len(ids) == 20
    for uid in ids:
        assert sweep.BAND[0] <= uid < sweep.BAND[1]
        assert sweep.processes_of(uid) == []
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)
    monkeypatch.setattr(sweep, "_mapped", lambda path: [(0, 65536)])
    assert sweep._band() == (2000, 65534)
    monkeypatch.setattr(sweep, "_mapped", lambda path: [(0, 1000), (100_000, 165_536)])
    assert sweep._band() == (100_000, 165_536)
    assert os.getpid() in sweep.processes_of(os.getuid())
