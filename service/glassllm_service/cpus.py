"""How many CPUs this process may really use: affinity, then the cgroup CPU quota.

``os.cpu_count()`` is the host's count: a container given ``--cpus 2`` on a 64-core host
still sees 64, and 64 uvicorn workers would fight over 2 cores' worth of time. The quota
is where the limit lives:

- cgroup v2: ``/sys/fs/cgroup/cpu.max`` holds ``"<quota> <period>"`` or ``"max <period>"``;
- cgroup v1: ``/sys/fs/cgroup/cpu/cpu.cfs_quota_us`` (``-1``: none) over
  ``cpu.cfs_period_us`` (also mounted as ``cpu,cpuacct``).

The answer is ``min(affinity, ceil(quota / period))``, at least 1. Kubernetes'
``resources.limits.cpu`` and compose's ``cpus:`` both become this quota.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["available_cpus", "cgroup_cpu_limit"]

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _ceil_ratio(quota: str, period: str) -> int | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    if q <= 0 or p <= 0:                       # -1 (v1) means no quota
        return None
    return max(1, math.ceil(q / p))


def cgroup_cpu_limit(root: Path = CGROUP_ROOT) -> int | None:
    """The CPU quota in whole CPUs (rounded up), or None when there is none.

    Reads cgroup v2 ``cpu.max`` first, then cgroup v1 ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us`` under ``cpu/`` or ``cpu,cpuacct/``. Unreadable or malformed
    files count as no quota. Example: ``cpu.max = "150000 100000"`` → 2.
    """
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return None if quota == "max" else _ceil_ratio(quota, period)
    for sub in ("cpu", "cpu,cpuacct"):
        quota = _read(root / sub / "cpu.cfs_quota_us")
        period = _read(root / sub / "cpu.cfs_period_us")
        if quota is not None and period is not None:
            return _ceil_ratio(quota, period)
    return None


def available_cpus(root: Path = CGROUP_ROOT) -> int:
    """CPUs this process may use: ``min(affinity, cgroup quota)``, at least 1.

    Affinity is ``os.sched_getaffinity(0)`` where the OS has it, else ``os.cpu_count()``.
    Used by ``glassllm-sandbox --workers auto`` (one worker per available CPU) and by the
    default of ``GLASSLLM_MAX_CONCURRENCY`` (SPEC H5).
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root)
    return max(1, min(cpus, limit) if limit is not None else cpus)
