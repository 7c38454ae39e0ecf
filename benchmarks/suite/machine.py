"""The machine a run measures: CPU, memory, usable cores, package versions, the commit (parent).

Every benchmark script writes these into its JSON (``benchmarks/run.py``,
``multi_agent.py``, ``ray_overhead.py``). The usable cores are
:func:`vecenv._cpus.usable_cpus`, the count that the worker layout uses.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Optional

from vecenv._cpus import usable_cpus

ROOT = Path(__file__).resolve().parents[2]  # the checkout (benchmarks/suite/ is two below)

VERSION_PACKAGES = (
    "vecenv",
    "numpy",
    "gymnasium",
    "stable-baselines3",
    "envpool",
    "ale-py",
    "mujoco",
    "torch",
    "ray",
    "cloudpickle",
)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> Optional[int]:
    """Total memory in bytes (psutil, else ``/proc/meminfo``), or None."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def load_average() -> Optional[list]:
    """The 1, 5 and 15 minute load averages, or None where the OS has none."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def cpu_max() -> Optional[str]:
    """The cgroup v2 CPU quota, ``/sys/fs/cgroup/cpu.max`` as written there
    ("max 100000": none; "800000 100000": 8 cores' worth), or None where the
    file is missing (no cgroup v2)."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            return f.read().strip()
    except OSError:
        return None


def machine_info() -> Dict[str, Any]:
    """CPU model, logical/physical/usable cores, the cgroup CPU quota, memory,
    platform, Python and the load average now (call it before the run: it is
    the start's)."""
    physical = None
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:
        pass
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": physical,
        "usable_cores": usable_cpus(),
        "cpu_max": cpu_max(),
        "memory_bytes": memory_bytes(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "load_average_start": load_average(),
    }


def package_versions(names: Iterable[str]) -> Dict[str, Optional[str]]:
    """The installed version of each distribution in ``names`` (None: not installed)."""
    out: Dict[str, Optional[str]] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def versions() -> Dict[str, Optional[str]]:
    """:data:`VERSION_PACKAGES`' versions, where vecenv was imported from, and
    the C compiler (``cc --version``'s first line) that builds the floor."""
    out = package_versions(VERSION_PACKAGES)
    try:
        import vecenv

        out["vecenv_path"] = os.path.dirname(vecenv.__file__)
    except ImportError as exc:
        out["vecenv_path"] = f"not importable: {exc}"
    cc = shutil.which("cc")
    if cc:
        try:
            out["cc"] = subprocess.run(
                [cc, "--version"], capture_output=True, text=True, timeout=10
            ).stdout.splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            out["cc"] = None
    return out


def git_info() -> Dict[str, Any]:
    """``{"commit": sha, "dirty": bool}`` of the checkout, or ``{"commit": None}``."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"commit": None}
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return {"commit": head.stdout.strip(), "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}


def report_header(args: Any, skip: Iterable[str] = ()) -> Dict[str, Any]:
    """The head of every benchmark JSON: schema, time, command line, arguments
    (``skip`` left out), the machine (its load average now, at the start), the
    versions and the commit."""
    return {
        "schema": 1,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [sys.executable, *sys.argv],
        "args": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in skip
        },
        "machine": machine_info(),
        "versions": versions(),
        "git": git_info(),
    }
