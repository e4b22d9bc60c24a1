"""Metrics across real worker processes (`glassllm-sandbox --workers 2`,
glassllm_service/supervisor.py): a worker killed with SIGKILL while it holds a compute slot stops
counting in the live gauges once the supervisor has replaced it (its counters stay); a
restart on the same ``PROMETHEUS_MULTIPROC_DIR`` starts its counters from zero; a
directory the workers cannot use stops the start in one line, before any worker runs
(it used to kill every worker with a traceback, forever, with the port bound).

The workers also agree on the /dist/ wheel each builds for itself (same bytes, ETag and
Last-Modified), from private directories under their temp dir."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families
from sandbox_server import ROOT, free_port, wait_healthy
from waiting import wait_until

from glassllm_service.cpus import available_cpus

pytestmark = pytest.mark.slow
WORKERS = 2
SLOTS = WORKERS * max(1, available_cpus() // WORKERS)
# about 3 multiply-adds of 1200³ three times: seconds of one slot, from a few kB of request
SLOW = {"expression": "((x * y) @ (x * y) @ (x * y)).sum()",
        "variables": {"x": [[1e-3]] * 1200, "y": [[1e-3] * 1200]}}
SLOW_ENV = {"GLASSLLM_MAX_RESULT_ELEMENTS": "40000000",
            "GLASSLLM_MAX_MATMUL_MADDS": "100000000000"}
NEG = {"inputs": {"a": [1.0]}}


@contextlib.contextmanager
def sandbox(env: dict, workers: int = WORKERS):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "glassllm_service.sandbox_cli",
                             "--port", str(port),
                             "--workers", str(workers), "--log-level", "warning"], cwd=ROOT,
                            env={**os.environ, "GLASSLLM_ACCESS_LOG": "0", **env},
                            stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout=60)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def value(url: str, name: str, **labels) -> float:
    """The sample's value summed over the workers (0 when no worker has it)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def busy_pids(folder: Path) -> dict[int, float]:
    """pid -> the slots it holds, read from its live-gauge file."""
    out = {}
    for f in folder.glob("gauge_livesum_*.db"):
        held = sum(v for key, v, *_ in MmapedDict.read_all_values_from_file(str(f))
                   if json.loads(key)[0] == "glassllm_slots_busy")
        out[int(f.stem.rsplit("_", 1)[1])] = held
    return out


def until(check, timeout: float = 60.0, what: str = "") -> None:
    wait_until(check, timeout, what, every=0.1)


def test_a_killed_workers_busy_slot_stops_counting_and_a_restart_starts_from_zero(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    env = {**SLOW_ENV, "PROMETHEUS_MULTIPROC_DIR": str(folder), "TMPDIR": str(tmp_path)}
    with sandbox(env) as (url, _):
        for _ in range(5):
            assert httpx.post(f"{url}/api/v1/ops/neg", json=NEG).status_code == 200
        assert value(url, "glassllm_slots") == SLOTS
        def post_slow() -> None:
            with contextlib.suppress(httpx.HTTPError):      # its worker is killed under it
                httpx.post(f"{url}/api/v1/eval", json=SLOW, timeout=120)

        slow = threading.Thread(target=post_slow, daemon=True)
        slow.start()
        until(lambda: value(url, "glassllm_slots_busy") == 1, what="a slot taken")
        (victim,) = [pid for pid, held in busy_pids(folder).items() if held == 1]
        os.kill(victim, signal.SIGKILL)
        # the supervisor notices, replaces the worker and marks the dead one's gauges dead
        until(lambda: not (folder / f"gauge_livesum_{victim}.db").exists(), what="marked dead")
        until(lambda: value(url, "glassllm_slots") == SLOTS, what="the replacement's slots")
        assert value(url, "glassllm_slots_busy") == 0
        assert value(url, "glassllm_queue_depth") == 0
        # the counters of what the dead worker answered still count
        assert value(url, "glassllm_requests_total", route="/api/v1/ops/neg", status="200") == 5
        slow.join(timeout=5)
        # the workers built the same wheel, each in a private folder of its own
        name = httpx.get(f"{url}/dist/").json()["wheels"][0]
        answers = [httpx.get(f"{url}/dist/{name}") for _ in range(6)]
        assert len({(r.content, r.headers["etag"], r.headers["last-modified"])
                    for r in answers}) == 1
        built = list(tmp_path.glob("glassllm-dist-*"))
        assert 1 <= len(built) <= WORKERS + 1
        assert all(p.stat().st_mode & 0o777 == 0o700 for p in built)
    assert list(folder.glob("gauge_livesum_*.db")) == []          # every worker marked dead
    assert list(folder.glob("counter_*.db"))                       # the old run's counters
    with sandbox(env) as (url, _):                                 # the same directory
        assert value(url, "glassllm_requests_total", route="/api/v1/ops/neg", status="200") == 0
        assert httpx.post(f"{url}/api/v1/ops/neg", json=NEG).status_code == 200
        assert value(url, "glassllm_requests_total", route="/api/v1/ops/neg", status="200") == 1
        # healthy means one worker answers; the other may still be starting on a busy machine
        until(lambda: value(url, "glassllm_slots") == SLOTS, what="every worker's slots")


def refused(env: dict, workers: int = WORKERS, limit_files: bool = False) -> str:
    """The one stderr line of a start that must be refused; quickly, with no worker."""
    def no_file_bytes():                           # a full disk for this process alone
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))

    done = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli",
                           "--port", str(free_port()),
                           "--workers", str(workers)], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=30,
                          preexec_fn=no_file_bytes if limit_files else None)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("glassllm-sandbox: PROMETHEUS_MULTIPROC_DIR=")
    return lines[0]


@pytest.mark.parametrize("workers", [WORKERS])
def test_a_metrics_dir_the_workers_cannot_use_stops_the_start_in_one_line(tmp_path, workers):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is not a directory" in refused({"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "no")},
                                           workers)
    assert "is not a directory" in refused({"PROMETHEUS_MULTIPROC_DIR": str(a_file)}, workers)
    empty = tmp_path / "full"
    empty.mkdir()
    line = refused({"PROMETHEUS_MULTIPROC_DIR": str(empty)}, workers, limit_files=True)
    assert "is not writable: File too large" in line
    if os.geteuid() != 0:                          # root writes through the mode bits
        empty.chmod(0o500)
        assert "is not writable" in refused({"PROMETHEUS_MULTIPROC_DIR": str(empty)}, workers)


def test_a_metrics_dir_with_other_files_is_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "counter_12.db").write_bytes(b"")
    line = refused({"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    assert "holds files that are not metrics files ('notes.txt')" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_12.db", "notes.txt"]
