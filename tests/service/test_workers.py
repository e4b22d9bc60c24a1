"""Several worker processes: `glassllm-sandbox --workers 2` over real HTTP;
/metrics sums every worker's counters (prometheus_client's multiprocess mode), each worker
takes its share of the CPUs as compute slots, and every answer carries a request id."""

from __future__ import annotations

import sys

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sandbox_server import running_sandbox

from glassllm_service.cpus import available_cpus

pytestmark = pytest.mark.slow
WORKERS = 2


def value(text: str, name: str, **labels) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name} {labels}")


def test_metrics_sum_over_worker_processes():
    cmd = [sys.executable, "-m", "glassllm_service.sandbox_cli", "--workers", str(WORKERS)]
    with running_sandbox(command=cmd) as url:
        n = 40
        with httpx.Client(base_url=url, timeout=60) as c:
            for i in range(n):            # new connections: the kernel spreads them
                r = httpx.post(f"{url}/api/v1/ops/neg", json={"inputs": {"a": [float(i)]}},
                               headers={"X-Request-ID": f"w-{i}"})
                assert r.json()["value"] == [-float(i)] and r.headers["x-request-id"] == f"w-{i}"
            text = c.get("/metrics").text
    assert value(text, "glassllm_requests_total", route="/api/v1/ops/neg", op="neg",
                 status="200") == n
    assert value(text, "glassllm_slots") == WORKERS * max(1, available_cpus() // WORKERS)
    assert value(text, "glassllm_queue_depth", lane="small") == 0
