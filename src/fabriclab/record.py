"""The record every run writes: resolved config, results, versions, git revision and host facts.

Reports are built from records only, so a record holds everything needed to tell two runs apart:
the fabriclab, Python, numpy and torch versions, the git revision of the code (and whether the
checkout had local changes), the machine (host name, OS, CPU model, cores, memory) and a UTC time.
Standard library only, and importable from every layer; torch is never imported here.

Try it: `fabriclab collectives verify --algo ring --ranks 1-8 --json verify.json`.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import fabriclab

RECORD_SCHEMA = 1


def make_record(kind: str, config: dict, results: Any, top: dict | None = None) -> dict:
    """A JSON-ready record of one run of `kind` (e.g. `collectives.verify`) with its config and results;
    `top`: headline numbers also put at the record's top level (e.g. `step_time_s`)."""
    if not kind:
        raise ValueError("a record needs a kind, e.g. 'collectives.bench'")
    return {
        "schema": RECORD_SCHEMA,
        "kind": kind,
        **_jsonable(top or {}),
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "config": _jsonable(config),
        "results": _jsonable(results),
        "versions": versions(),
        "git": git_revision(),
        "host": host_facts(),
    }


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Write `record` as indented JSON to `path` (parent folders are created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_jsonable(record), indent=2, allow_nan=False) + "\n")
    return out


def write_csv(path: str | os.PathLike, rows: list[dict]) -> Path:
    """Write `rows` as CSV; the header is every key in order of first appearance."""
    header: dict[str, None] = {}
    for row in rows:
        header.update(dict.fromkeys(row))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(header), restval="")
        writer.writeheader()
        writer.writerows(_jsonable(rows))
    return out


def write_outputs(folder: str | os.PathLike, stem: str, kind: str, config: dict, results: Any,
                  rows: list[dict]) -> None:
    """A run's `--out` folder: `stem.json` (its record) and `stem.csv` (its rows); folders are created."""
    write_record(Path(folder) / f"{stem}.json", make_record(kind, config, results))
    write_csv(Path(folder) / f"{stem}.csv", rows)


def versions() -> dict[str, str | None]:
    """Versions of fabriclab, Python, numpy and torch; torch is read from metadata unless imported."""
    torch = sys.modules.get("torch")
    return {
        "fabriclab": fabriclab.__version__,
        "python": platform.python_version(),
        "numpy": _dist_version("numpy"),
        "torch": getattr(torch, "__version__", None) or _dist_version("torch"),
    }


def git_revision(where: str | os.PathLike | None = None) -> dict | None:
    """`{"revision": sha, "dirty": bool}` of the checkout holding `where` (default: this package).

    None outside a git checkout, before the first commit, or where git is not installed."""
    cwd = Path(where) if where is not None else Path(fabriclab.__file__).resolve().parent
    revision = _git(["rev-parse", "HEAD"], cwd)
    if revision is None:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return {"revision": revision, "dirty": bool(status)}


def host_facts() -> dict[str, Any]:
    """Host name, OS, CPU model, logical cores (all and usable by this process) and memory in bytes."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "num_cpus": os.cpu_count(),
        "num_cpus_usable": usable,
        "memory_bytes": _memory_bytes(),
    }


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _jsonable(value: Any) -> Any:
    """Plain JSON types from dataclasses, paths, tuples, sets and numpy scalars or arrays; NaN and
    infinities become null (records are standard JSON)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist") and callable(value.tolist):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None  # standard JSON has no NaN/Infinity: a value that is not a number is null
    return value
