"""The two grader images run for real, each with ``--network none``, on a right, a wrong,
a crashing, a looping and a cheating submission (docker/grader/test.sh builds them); then
on docker/grader/probe.py (what the student's code can read and import) and
docker/grader/cheats.py (every reported way around a grader, at once), each twice: as the
platforms start a job (root, Docker's default capabilities: the child in its jail) and
with chroot taken away (``--cap-drop SYS_CHROOT``: the image's file permissions alone).

    python docker/grader/smoke.py --prairielearn IMAGE --gradescope IMAGE [--docker docker]

Each run's results file is read where the platform reads it and checked: valid against
the platform's schema (docs/schemas/), complete (every case a test), the score the
submission deserves, and the reason in words. The loop runs with a 4 s budget
(GLASSLLM_GRADE_SECONDS) so the check stays quick.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "examples" / "softmax-backward.toml"
RIGHT = (ROOT / "examples" / "student_softmax.py").read_text()
SUBMISSIONS = {   # name: (source, fraction of the points, words every failed test says)
    "right": (RIGHT, 1.0, ""),
    "wrong": (RIGHT.replace("return s * (g - (g * s).sum(axis=-1, keepdims=True))",
                            "return -s * (g - (g * s).sum(axis=-1, keepdims=True))"),
              0.0, "right but for the sign"),
    "crashing": ("import os\ndef softmax_backward(x, g):\n    os.abort()\n", 0.0,
                 "the process ended in the middle of this case"),
    "looping": ("def softmax_backward(x, g):\n    while True:\n        pass\n", 0.0,
                "time"),      # did not finish within its share of the time, or none was left
    "cheating": ('''
import glob, json, os
import numpy as np
def softmax_backward(x, g):
    for path in glob.glob("/grade/tests/*") + glob.glob("/autograder/source/*.toml"):
        try:
            open(path).read()
            print("read", path)
        except OSError as exc:
            print("denied", type(exc).__name__)
    for path in ("/grade/results/results.json", "/autograder/results/results.json"):
        try:
            with open(path, "w") as f:
                f.write(json.dumps({"score": 1.0, "max_score": 8.0}))
        except OSError as exc:
            print("denied", type(exc).__name__)
    print(json.dumps({"score": 1.0, "gradable": True, "tests": []}))
    try:
        import glassllm
    except ImportError as exc:
        print("denied", type(exc).__name__)
    return np.zeros_like(x)
''', 0.0, ""),
}


PROBE = (ROOT / "docker" / "grader" / "probe.py").read_text()
CHEATS = (ROOT / "docker" / "grader" / "cheats.py").read_text()
NO_CHROOT = ["--cap-drop", "SYS_CHROOT"]


def _schema(name: str) -> dict:
    return json.loads((ROOT / "docs" / "schemas" / f"{name}-results.schema.json").read_text())


def _run(docker: str, image: str, platform: str, source: str, loop: bool,
         caps: list[str] = ()) -> tuple[dict, float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = ["-e", "GLASSLLM_GRADE_SECONDS=4"] if loop else []
        if platform == "prairielearn":
            for sub in ("tests", "student", "data", "results"):
                (home / "grade" / sub).mkdir(parents=True)
            (home / "grade/tests/softmax-backward.toml").write_text(EXERCISE.read_text())
            (home / "grade/student/answer.py").write_text(source)
            (home / "grade/data/data.json").write_text(json.dumps({"params": {
                "student": "ada"}, "variant_seed": 1}))
            course = home / "grade/serverFilesCourse/glassllm"      # test.sh's zip's twins
            course.mkdir(parents=True)
            (course / "salt").write_text("a-smoke-test-course-salt\n")
            (course / "roster.csv").write_text("student_id,display_name,email\nada,Ada,ada@x\n")
            mounts = ["-v", f"{home / 'grade'}:/grade"]
            out = home / "grade/results/results.json"
        else:
            for sub in ("submission", "results"):
                (home / sub).mkdir()
            (home / "submission/answer.py").write_text(source)
            (home / "metadata.json").write_text(json.dumps({"users": [{"email": "ada@x"}]}))
            mounts = ["-v", f"{home / 'submission'}:/autograder/submission",
                      "-v", f"{home / 'results'}:/autograder/results",
                      "-v", f"{home / 'metadata.json'}:/autograder/submission_metadata.json"]
            out = home / "results/results.json"
        start = time.monotonic()
        done = subprocess.run([docker, "run", "--rm", "--network", "none", *caps, *env,
                               *mounts, image], capture_output=True, text=True, timeout=120)
        took = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"{platform}: the grader exited {done.returncode}:\n"
                             f"{done.stdout}{done.stderr}")
        return json.loads(out.read_text()), took, done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prairielearn", required=True)
    parser.add_argument("--gradescope", required=True)
    parser.add_argument("--docker", default="docker")
    args = parser.parse_args()
    failures = []
    for platform, image in (("prairielearn", args.prairielearn),
                            ("gradescope", args.gradescope)):
        for name, (source, fraction, words) in SUBMISSIONS.items():
            results, took, _ = _run(args.docker, image, platform, source, name == "looping")
            jsonschema.validate(results, _schema(platform))
            score = results["score"] if platform == "prairielearn" else \
                results["score"] / results["max_score"]
            texts = [t.get("message", "") + t.get("output", "") for t in results["tests"]]
            ok = (len(results["tests"]) == 5 and abs(score - fraction) < 1e-9
                  and all(words in t for t in texts)
                  and (name != "cheating" or all("denied" in t for t in texts)))
            print(f"{platform:12} {name:9} score {score:.2f} (want {fraction:.2f})"
                  f" {took:5.1f} s  {'ok' if ok else 'FAILED'}")
            if not ok:
                failures.append(f"{platform} {name}: {json.dumps(results)[:2000]}")
        for jailed, caps in ((True, []), (False, NO_CHROOT)):
            failures += _probe(args.docker, image, platform, jailed, caps)
            failures += _cheats(args.docker, image, platform, jailed, caps)
    if failures:
        print("\n".join(failures), file=sys.stderr)
        raise SystemExit(1)


def _probe(docker: str, image: str, platform: str, jailed: bool, caps: list[str]) -> list:
    """What the child reads and imports: in its jail, only the private Python (its
    standard library, NumPy copy and libraries) and its own directory; without chroot,
    still no site-packages, no venv, no platform folder; glassllm, torch and jax by no
    path, either way."""
    results, took, log = _run(docker, image, platform, PROBE, False, caps)
    text = "\n".join(t.get("output", "") for t in results["tests"])
    line = next((x for x in text.splitlines() if x.startswith("PROBE ")), None)
    if line is None:
        return [f"{platform} probe: no report: {json.dumps(results)[:2000]}"]
    probe = json.loads(line[len("PROBE "):])
    files = probe["files"]
    if jailed:
        allowed = ("/usr/lib/python3", "/usr/lib/glassllm-child", "/numpy/", "/lib64",
                   "/lib/ld-", "<own>")
        outside = [k for k in files if not k.startswith(allowed)]
        expect_off = "file-system jail" not in log
    else:       # the base's standard library and C libraries, the private Python
        allowed = ("/usr/lib/python3.", "/usr/local/lib/python3.", "/usr/lib/x86_64-linux-gnu",
                   "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib64", "/usr/libexec",
                   "/var/cache/glassllm", "<own>")
        outside = [k for k in files if not k.startswith(allowed)
                   or "-packages" in k or "python-wheels" in k or "ensurepip" in k]
        expect_off = "file-system jail: chroot" in log
    imported = [k for k, v in probe["imports"].items() if v == "imported"]
    ok = (not outside and not imported and len(probe["imports"]) >= 30 and expect_off
          and probe["uid"] >= 0x4000_0000 and results["score"] == 0
          and "protections" not in json.dumps(results))     # the log's, not the student's
    where = "jailed" if jailed else "no chroot"
    print(f"{platform:12} probe ({where}) {len(files)} folders, {len(probe['imports'])}"
          f" imports tried {took:5.1f} s  {'ok' if ok else 'FAILED'}")
    return [] if ok else [f"{platform} probe ({where}): outside {outside}, imported"
                          f" {imported}, uid {probe['uid']}, log {log[-1500:]}"]


def _cheats(docker: str, image: str, platform: str, jailed: bool, caps: list[str]) -> list:
    results, took, log = _run(docker, image, platform, CHEATS, False, caps)
    text = "\n".join(t.get("output", "") for t in results["tests"])
    worked = [x for x in text.splitlines() if x.endswith(" WORKED")]
    denied = [x for x in text.splitlines() if " denied " in x]
    ok = (not worked and len(denied) >= 30 and results["score"] == 0
          and "protections" not in json.dumps(results))
    where = "jailed" if jailed else "no chroot"
    print(f"{platform:12} cheats ({where}) {len(denied)} denied, {len(worked)} worked"
          f" {took:5.1f} s  {'ok' if ok else 'FAILED'}")
    return [] if ok else [f"{platform} cheats ({where}): worked {worked}; {text[:3000]};"
                          f" log {log[-1500:]}"]


if __name__ == "__main__":
    main()
