"""How many CPUs this process may use: the CPUs it may run on (its affinity), fewer when its control group has a
CPU quota.

A container started with ``--cpus 2``, or a Kubernetes pod with a CPU limit of 2, sees every core of its host
in its affinity: one reader process per core there would share two CPUs' worth of time, each holding its own
memory. So the quota caps the count:

- cgroup v2: ``cpu.max`` ("QUOTA PERIOD" in microseconds, "max PERIOD" without a limit);
- cgroup v1: ``cpu.cfs_quota_us`` (-1 without a limit) and ``cpu.cfs_period_us`` of the ``cpu`` controller;

of the process's group and of every group above it (the smallest limit holds), as ``/proc/self/cgroup`` names
them. Inside a container the group's path is often not mounted (the container's own group is the mount's
root): the folders that do not exist are passed over. A limit of 1.5 CPUs counts as 2, rounded up (the last
reader still has half a CPU's time). Written here because neither Python (``os.process_cpu_count`` reads the
affinity only) nor the project's dependencies read the quota.
"""

from __future__ import annotations

import math
import os

CGROUP_ROOT = "/sys/fs/cgroup"
MEMBERSHIP = "/proc/self/cgroup"


def usable_cpus(root: str = CGROUP_ROOT, membership: str = MEMBERSHIP) -> int:
    """The CPUs this process may use (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit(root, membership)
    return max(1, min(cpus, limit)) if limit is not None else cpus


def cgroup_cpu_limit(root: str = CGROUP_ROOT, membership: str = MEMBERSHIP) -> int | None:
    """The CPU quota of this process's control groups, in whole CPUs; None when there is none (or no cgroups)."""
    try:
        with open(membership, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    limits: list[int | None] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if hierarchy == "0" and not controllers:  # the unified (v2) hierarchy
            limits += [_v2_limit(folder) for folder in _groups(root, group)]
        elif "cpu" in controllers.split(","):
            mounts = (os.path.join(root, name) for name in (controllers, "cpu", "cpu,cpuacct"))
            mount = next((m for m in mounts if os.path.isdir(m)), None)
            if mount is not None:
                limits += [_v1_limit(folder) for folder in _groups(mount, group)]
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


def _groups(mount: str, group: str) -> list[str]:
    """The folders of ``group`` and of the groups above it, below ``mount``, that exist."""
    parts = [p for p in group.split("/") if p and p != ".."]
    folders = [os.path.join(mount, *parts[:n]) for n in range(len(parts), -1, -1)]
    return [folder for folder in folders if os.path.isdir(folder)]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _cpus(quota: int, period: int) -> int | None:
    return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None


def _v2_limit(folder: str) -> int | None:
    text = _read(os.path.join(folder, "cpu.max"))
    fields = text.split() if text else []
    if len(fields) != 2 or not fields[0].isdigit() or not fields[1].isdigit():
        return None  # "max PERIOD": no limit (or no cpu controller here)
    return _cpus(int(fields[0]), int(fields[1]))


def _v1_limit(folder: str) -> int | None:
    quota, period = _read(os.path.join(folder, "cpu.cfs_quota_us")), _read(os.path.join(folder, "cpu.cfs_period_us"))
    try:
        return _cpus(int(quota or ""), int(period or ""))
    except ValueError:
        return None
