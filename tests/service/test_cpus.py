"""glassllm_service.cpus: workers and the default concurrency follow the container's CPU quota,
read from cgroup v2 cpu.max or cgroup v1 cfs_quota_us / cfs_period_us."""

from __future__ import annotations

import os

import pytest

from glassllm_service import cpus
from glassllm_service import sandbox_cli as cli


def tree(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return tmp_path


@pytest.mark.parametrize(("files", "limit"), [
    ({"cpu.max": "200000 100000"}, 2),
    ({"cpu.max": "150000 100000"}, 2),          # 1.5 CPUs round up: a worker per started CPU
    ({"cpu.max": "50000 100000"}, 1),
    ({"cpu.max": "max 100000"}, None),
    ({"cpu.max": "garbage"}, None),
    ({"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000"}, 3),
    ({"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),
    ({"cpu,cpuacct/cpu.cfs_quota_us": "25000", "cpu,cpuacct/cpu.cfs_period_us": "100000"}, 1),
    ({}, None),
])
def test_cgroup_cpu_limit_reads_v2_and_v1(tmp_path, files, limit):
    assert cpus.cgroup_cpu_limit(tree(tmp_path, files)) == limit


def test_available_cpus_is_the_smaller_of_affinity_and_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    assert cpus.available_cpus(tree(tmp_path / "a", {"cpu.max": "300000 100000"})) == 3
    assert cpus.available_cpus(tree(tmp_path / "b", {"cpu.max": "max 100000"})) == 8
    assert cpus.available_cpus(tree(tmp_path / "c", {"cpu.max": "5000000 100000"})) == 8
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert cpus.available_cpus(tree(tmp_path / "d", {"cpu.max": "max 100000"})) == 1


def test_workers_auto_is_available_cpus(monkeypatch):
    import uvicorn

    monkeypatch.setattr(cpus, "available_cpus", lambda root=cpus.CGROUP_ROOT: 5)
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    cli.main(["--workers", "auto"])
    assert seen["workers"] == 5
    cli.main(["--workers", "2"])
    assert seen["workers"] == 2
