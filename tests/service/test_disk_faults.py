"""Disk faults are errors, not bugs: a real sandbox on a disk that fills or is read-only.

``GET /dist/<wheel>`` writes the wheel on first use. On a full disk or a file-size limit
it answered 500 "this is a bug" and left a partial file; now 507 with one line saying
what is wrong (code `insufficient_storage`: no room; `storage_unavailable`: a read-only
or missing directory), and no file left.
``--workers 2`` with no writable temporary directory ended in a traceback; now one line.

The full and read-only disks are real tmpfs mounts in a private mount namespace of the
server (``unshare -m``: nothing is mounted outside it), where the machine allows it; the
file-size limit (RLIMIT_FSIZE, EFBIG) works everywhere.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys

import httpx
import pytest
from sandbox_server import ROOT, free_port, wait_healthy

from glassllm_service.routes.dist import wheel_name

pytestmark = pytest.mark.slow


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


MOUNTS = _can_mount()


# Every directory Python's tempfile tries, read-only (a container's read-only root with
# no tmpfs at /tmp): TMPDIR (under /tmp here), /tmp, /var/tmp, the cwd. Each is bound onto
# itself read-only, not covered: a checkout or a venv that lives under /tmp stays readable.
READ_ONLY = ('for d in /tmp /var/tmp; do mount --bind "$d" "$d" &&'
             ' mount -o remount,bind,ro "$d" || exit 9; done; cd /tmp && exec "$@"')


def serve(tmpdir, *, mount: str | None = None, fsize: int | None = None):
    """The sandbox with TMPDIR=tmpdir; `mount`: tmpfs options for a tmpfs mounted there in
    the server's own mount namespace ("read-only": every temporary directory read-only);
    `fsize`: its file-size limit in bytes."""
    port = free_port()
    cmd = [sys.executable, "-m", "glassllm_service.sandbox_cli",
           "--host", "127.0.0.1", "--port", str(port),
           "--log-level", "warning"]
    if mount == "read-only":
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", READ_ONLY, "sh", *cmd]
    elif mount is not None:
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               f'mount -t tmpfs -o {mount} tmpfs "$0" && exec "$@"', str(tmpdir), *cmd]

    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmpdir),
                                                "GLASSLLM_ACCESS_LOG": "0"},
                            preexec_fn=limit, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
    except BaseException:
        proc.kill()
        proc.communicate()                  # its stderr pipe closed, not left to the gc
        raise
    return proc, url


def stop(proc) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err.decode(errors="replace")


def files_in(proc, tmpdir) -> list[str]:
    """Regular files under tmpdir as the server sees it (its own mount, if any)."""
    root = f"/proc/{proc.pid}/root{tmpdir}"
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]


def fetch(url: str) -> httpx.Response:
    return httpx.get(f"{url}/dist/{wheel_name()}", timeout=60)


def check_refusal(r: httpx.Response, status: int, code: str, words: str) -> None:
    assert r.status_code == status, r.text[:300]
    err = r.json()["error"]
    assert err["code"] == code and words in err["message"], err
    assert "bug" not in err["message"] and "\n" not in err["message"]


def test_a_file_size_limit_gives_507_and_leaves_no_partial_file(tmp_path):
    proc, url = serve(tmp_path, fsize=256 * 1024)     # the wheel is a few MB
    try:
        r = fetch(url)
        head = httpx.head(f"{url}/dist/{wheel_name()}", timeout=60)
        left = files_in(proc, tmp_path)
        healthy = httpx.get(f"{url}/healthz", timeout=5).status_code
    finally:
        err = stop(proc)
    check_refusal(r, 507, "insufficient_storage", "File too large")
    assert head.status_code == 507
    assert left == [] and healthy == 200
    assert "Traceback" not in err


@pytest.mark.skipif(not MOUNTS, reason="no private mount namespace here (unshare -m)")
def test_a_full_disk_gives_507_and_leaves_no_partial_file(tmp_path):
    proc, url = serve(tmp_path, mount="size=256k")
    try:
        r = fetch(url)
        left = files_in(proc, tmp_path)
        again = fetch(url)                            # still an answer, not a stale file
    finally:
        err = stop(proc)
    check_refusal(r, 507, "insufficient_storage", "No space left on device")
    assert left == [] and again.status_code == 507
    assert "Traceback" not in err


@pytest.mark.skipif(not MOUNTS, reason="no private mount namespace here (unshare -m)")
def test_no_writable_temporary_directory_gives_507_storage_unavailable(tmp_path):
    proc, url = serve(tmp_path, mount="read-only")
    try:
        r = fetch(url)
        ok = httpx.post(f"{url}/api/v1/ops/neg", json={"inputs": {"a": [1.0]}}, timeout=10)
    finally:
        err = stop(proc)
    check_refusal(r, 507, "storage_unavailable", "No usable temporary directory")
    assert ok.status_code == 200                      # nothing else needs the disk
    assert "Traceback" not in err


def test_several_workers_with_no_writable_temporary_directory_stop_in_one_line(tmp_path):
    """tempfile's directory set to one that cannot be made (as a read-only root with no
    /tmp leaves it): one line, exit status 1, no traceback, nothing started."""
    code = ("import tempfile, sys; tempfile.tempdir = sys.argv[1];"
            " from glassllm_service.sandbox_cli import main;"
            " main(['--workers', '2', '--port', sys.argv[2]])")
    missing = tmp_path / "gone" / "tmp"
    out = subprocess.run([sys.executable, "-c", code, str(missing), str(free_port())],
                         cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": ""})
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "glassllm-sandbox: several workers need a writable temporary directory"), out.stderr
    assert "TMPDIR" in lines[0]


@pytest.mark.skipif(not MOUNTS, reason="no private mount namespace here (unshare -m)")
def test_several_workers_on_a_read_only_root_stop_in_one_line(tmp_path):
    """Every directory tempfile tries read-only (a container's read-only root without a
    tmpfs at /tmp): one line."""
    port = free_port()
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", READ_ONLY,
                          "sh", sys.executable, "-m", "glassllm_service.sandbox_cli",
                          "--workers", "2",
                          "--port", str(port)],
                         capture_output=True, text=True, timeout=60,
                         env={**{k: v for k, v in os.environ.items()
                                 if k not in ("TMPDIR", "TEMP", "TMP",
                                              "PROMETHEUS_MULTIPROC_DIR")},
                              "PYTHONPATH": str(ROOT)})
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "writable temporary directory" in lines[0], out.stderr
