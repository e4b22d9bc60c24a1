"""How many CPUs this process may really use: affinity, then the cgroup's CPU quota.

``os.cpu_count()`` reports the host's CPUs; a container limited with ``--cpus=2`` on a
64-core host would then start 64 workers and 64 compute slots and thrash. The quota is
read from cgroup v2 (``cpu.max``: "quota period") or v1 (``cpu.cfs_quota_us`` /
``cpu.cfs_period_us``) and rounded up, never below 1.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def _quota(root: Path = CGROUP) -> float | None:
    """The cgroup's CPU quota in CPUs (2.5 = 250 ms of CPU per 100 ms), None when unlimited."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]       # cgroup v2
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())      # cgroup v1
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def available_cpus(root: Path = CGROUP) -> int:
    """CPUs this process may use: min(affinity mask, ⌈cgroup quota⌉), at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:                                   # not on Linux
        n = os.cpu_count() or 1
    quota = _quota(root)
    if quota is not None:
        n = min(n, math.ceil(quota))
    return max(1, n)
