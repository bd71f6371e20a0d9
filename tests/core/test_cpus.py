"""The CPUs a scan uses by default: the affinity, capped by a cgroup CPU quota (read from cgroup files laid
out here as the kernel lays them out)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scanner_service.cpus import cgroup_cpu_limit, usable_cpus
from scanner_service.runner import default_workers

AFFINITY = len(os.sched_getaffinity(0))


def tree(root: Path, membership: str, files: dict[str, str]) -> tuple[str, str]:
    """A cgroup mount at ``root`` holding ``files`` (path: content), and a /proc/self/cgroup file."""
    for rel, text in files.items():
        path = root / "mnt" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    (root / "mnt").mkdir(exist_ok=True)
    (root / "cgroup").write_text(membership)
    return str(root / "mnt"), str(root / "cgroup")


@pytest.mark.parametrize(
    ("membership", "files", "expected"),
    [
        # cgroup v2: a pod limited to 2 CPUs, its group mounted as in a container (path not mounted: the root)
        ("0::/kubepods/pod1/c1\n", {"cpu.max": "200000 100000"}, 2),
        ("0::/\n", {"cpu.max": "max 100000"}, None),
        ("0::/\n", {"cpu.max": "150000 100000"}, 2),  # 1.5 CPUs: rounded up
        ("0::/\n", {"cpu.max": "50000 100000"}, 1),
        # on a host: the group and the groups above it, the smallest limit holds
        ("0::/a/b\n", {"a/b/cpu.max": "400000 100000", "a/cpu.max": "300000 100000"}, 3),
        ("0::/a/b\n", {"a/b/cpu.max": "max 100000", "a/cpu.max": "max 100000"}, None),
        ("0::/a/b\n", {}, None),  # no cpu controller enabled there
        # cgroup v1: cpu,cpuacct mounted together, or cpu alone
        ("4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "300000",
                                                           "cpu,cpuacct/cpu.cfs_period_us": "100000"}, 3),
        ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),
        ("2:cpuacct,cpu:/g\n", {"cpu/g/cpu.cfs_quota_us": "100000", "cpu/g/cpu.cfs_period_us": "100000"}, 1),
        ("2:memory:/g\n", {"memory/g/memory.limit_in_bytes": "1"}, None),
        ("garbage\n", {"cpu.max": "200000 100000"}, None),
        ("0::/\n", {"cpu.max": "two 100000"}, None),
    ],
)  # fmt: skip
def test_cgroup_cpu_limit(tmp_path: Path, membership: str, files: dict[str, str], expected: int | None) -> None:
    assert cgroup_cpu_limit(*tree(tmp_path, membership, files)) == expected


def test_the_quota_caps_the_affinity_and_never_goes_below_one(tmp_path: Path) -> None:
    root, membership = tree(tmp_path, "0::/\n", {"cpu.max": "100000 100000"})
    assert usable_cpus(root, membership) == 1
    assert usable_cpus(str(tmp_path / "none"), str(tmp_path / "none")) == AFFINITY  # no cgroups: the affinity
    root, membership = tree(tmp_path / "big", "0::/\n", {"cpu.max": f"{(AFFINITY + 8) * 100000} 100000"})
    assert usable_cpus(root, membership) == AFFINITY


def test_default_workers_on_this_machine() -> None:
    assert 1 <= default_workers() <= AFFINITY
    assert default_workers() == usable_cpus()
