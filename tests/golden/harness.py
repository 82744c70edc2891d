"""Run a golden command, normalise what it wrote, and compare two normalised outputs.

Shared by `record.py` (writes `data/<name>.json`) and `test_golden.py` (compares against them). Standard
library only. Every command runs as `python -m fabriclab ...` in a fresh process (the interpreter running
this code, with its environment and `FABRICLAB_STORE=off`) in an empty folder of its own.

Normalisation keeps the answers and drops what is not one (see `normalise`):

- the record's `created_utc`, `versions`, `git` and `host` (time, versions, git revision, host facts);
- at any depth, keys that time our own code (`VOLATILE_KEY`: `wall_s`, `sim_wall_s`, `general_wall_s`, and any
  key naming wall, elapsed, started, duration, time_taken or seconds_wall) and `VOLATILE_KEYS` (`sweep_s`:
  how long `whatif reproduce` took; `peak_MB`: the process's peak memory);
- `config` keys that are output or store paths (`OUTPUT_PATH_KEYS`);
- for bench commands, every `results` field outside the command's `keep` list (timings and what is derived
  from them: speed-ups, points per second, meets/within target);
- in printed text (the nccl-tests table of `simulate collective --cluster --format nccl-tests`), fabriclab's
  prose notes above the table (lines starting `# fabriclab `; the record holds the same facts);
- absolute paths inside strings become `{examples}` (the shipped logs) or `{cwd}` (the command's folder).

Everything else stays: every simulated, predicted or fitted number, every config number and every string.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLES = REPO / "examples" / "nccl-tests-a100"
DATA = HERE / "data"

# The cluster file the commands with `{cluster}` use: `calibrate nccl-tests` on all five shipped logs.
CLUSTER_ARGV = ["calibrate", "nccl-tests", *[f"{{examples}}/nccl_{n}.log" for n in (1, 2, 4, 8, 16)],
                "--out", "a100.json"]
CLUSTER_NAME = "a100.json"  # its name in each command's folder (the cluster's name, a100, is inside it)
RECORD_FILE = "record.json"  # commands write `--json record.json`
TIMEOUT_S = 120

# Record keys that are not answers: when it was made, with which versions, git revision and host.
RECORD_METADATA = ("created_utc", "versions", "git", "host", "command")
# Keys (at any depth) that time our own code.
VOLATILE_KEY = re.compile(r"(^|_)wall(_|$)|elapsed|started|duration|time_taken|seconds_wall", re.IGNORECASE)
VOLATILE_KEYS = frozenset({"sweep_s", "peak_MB"})
# `config` keys that name where the run wrote its outputs or record.
OUTPUT_PATH_KEYS = frozenset({"out", "json", "store"})

# Printed text (`stdout="text"`, the nccl-tests table): fabriclab's own prose notes above the table start with
# this; they are dropped (what they say, e.g. which rows rest on priors, is in the record), the table is kept.
NOTE_PREFIX = "# fabriclab "

REL_TOL = 1e-12
ZERO_ABS_TOL = 1e-15


class CommandFailed(AssertionError):
    pass


def fill(arg: str) -> str:
    """An argv element with its placeholders filled: `{examples}` and `{cluster}`."""
    return arg.replace("{examples}", str(EXAMPLES)).replace("{cluster}", CLUSTER_NAME)


def fabriclab(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`python -m fabriclab *argv` in `cwd` (this interpreter and environment, the results store off)."""
    env = dict(os.environ, FABRICLAB_STORE="off")
    done = subprocess.run([sys.executable, "-m", "fabriclab", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise CommandFailed(f"`fabriclab {' '.join(argv)}` exited with {done.returncode}:\n"
                            f"{done.stderr[-2000:]}")
    return done


def make_cluster(folder: Path) -> Path:
    """Fit the cluster file the `{cluster}` commands use, in `folder`; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    fabriclab([fill(a) for a in CLUSTER_ARGV], folder)
    return folder / "a100.json"


def run_raw(command, cwd: Path, cluster: Path | None) -> dict:
    """Run one command in the empty folder `cwd`; what it wrote, not normalised:
    {"record": ..., "files": {name: json}, "stdout": ...} (keys only where the command has them)."""
    cwd.mkdir(parents=True, exist_ok=True)
    if any("{cluster}" in a for a in command.argv):
        if cluster is None:
            raise ValueError(f"{command.name} needs a cluster file")
        shutil.copyfile(cluster, cwd / CLUSTER_NAME)
    done = fabriclab([fill(a) for a in command.argv], cwd)
    raw: dict[str, Any] = {}
    if RECORD_FILE in command.argv:
        raw["record"] = json.loads((cwd / RECORD_FILE).read_text())
    if command.files:
        raw["files"] = {name: json.loads((cwd / name).read_text()) for name in command.files}
    if command.stdout == "json-lines":
        raw["stdout"] = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    elif command.stdout == "text":
        raw["stdout"] = done.stdout.splitlines()
    elif command.stdout is not None:
        raise ValueError(f"{command.name}: stdout must be None, 'json-lines' or 'text'")
    return raw


def normalise(command, raw: dict, cwd: Path, dropped: list[str] | None = None) -> dict:
    """`raw` without what is not an answer (module docstring); the paths dropped go to `dropped`."""
    dropped = [] if dropped is None else dropped
    paths = [(str(EXAMPLES), "{examples}"), (str(EXAMPLES.resolve()), "{examples}"),
             (str(cwd.resolve()), "{cwd}"), (str(cwd), "{cwd}")]
    out: dict[str, Any] = {}
    if "record" in raw:
        record = dict(raw["record"])
        for key in RECORD_METADATA:
            if key in record:
                del record[key]
                dropped.append(f"record.{key}")
        if isinstance(record.get("config"), dict):
            record["config"] = dict(record["config"])
            for key in sorted(OUTPUT_PATH_KEYS & set(record["config"])):
                del record["config"][key]
                dropped.append(f"record.config.{key}")
        if command.keep is not None and "results" in record:
            record["results"] = _keep(record["results"], set(command.keep), "record.results", dropped)
        out["record"] = _clean(record, "record", paths, dropped)
    if "files" in raw:
        out["files"] = _clean(raw["files"], "files", paths, dropped)
    if "stdout" in raw:
        stdout = raw["stdout"]
        if command.stdout == "text":
            notes = [i for i, line in enumerate(stdout) if line.startswith(NOTE_PREFIX)]
            dropped.extend(f"stdout[{i}]" for i in notes)
            stdout = [line for line in stdout if not line.startswith(NOTE_PREFIX)]
        out["stdout"] = _clean(stdout, "stdout", paths, dropped)
    return out


def _keep(results: Any, keep: set[str], where: str, dropped: list[str]) -> Any:
    if isinstance(results, list):
        return [_keep(r, keep, f"{where}[{i}]", dropped) for i, r in enumerate(results)]
    if isinstance(results, dict):
        dropped.extend(f"{where}.{k}" for k in results if k not in keep)
        return {k: v for k, v in results.items() if k in keep}
    return results


def _clean(value: Any, where: str, paths: list[tuple[str, str]], dropped: list[str]) -> Any:
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            if VOLATILE_KEY.search(k) or k in VOLATILE_KEYS:
                dropped.append(f"{where}.{k}")
            else:
                kept[k] = _clean(v, f"{where}.{k}", paths, dropped)
        return kept
    if isinstance(value, list):
        return [_clean(v, f"{where}[{i}]", paths, dropped) for i, v in enumerate(value)]
    if isinstance(value, str):
        for path, name in paths:
            value = value.replace(path, name)
        return value
    return value


def rename(stored: Any, keys: dict[str, str], strings: dict[str, str]) -> Any:
    """`stored` with every key in `keys` renamed (at any depth) and every substring in `strings` replaced."""
    if isinstance(stored, dict):
        return {keys.get(k, k): rename(v, keys, strings) for k, v in stored.items()}
    if isinstance(stored, list):
        return [rename(v, keys, strings) for v in stored]
    if isinstance(stored, str):
        for old, new in strings.items():
            stored = stored.replace(old, new)
    return stored


def compare(stored: Any, new: Any, path: str = "$", exact: bool = False) -> list[str]:
    """Every difference between `stored` and `new` as `path: stored X, new Y`: numbers within REL_TOL
    relative (ZERO_ABS_TOL where one is 0; bit for bit with `exact`), strings, booleans and null exactly,
    the same keys and lengths."""
    diffs: list[str] = []
    _compare(stored, new, path, diffs, exact)
    return diffs


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _compare(a: Any, b: Any, path: str, diffs: list[str], exact: bool) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                diffs.append(f"{path}.{k}: stored {_short(a[k])}, new: key missing")
        for k in b:
            if k not in a:
                diffs.append(f"{path}.{k}: stored: key missing, new {_short(b[k])}")
        for k in a:
            if k in b:
                _compare(a[k], b[k], f"{path}.{k}", diffs, exact)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: stored {len(a)} items, new {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, f"{path}[{i}]", diffs, exact)
    elif _is_number(a) and _is_number(b):
        if a == b:
            return
        if exact:
            ok = False
        elif a == 0 or b == 0:
            ok = abs(a - b) <= ZERO_ABS_TOL
        else:
            ok = math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)
        if not ok:
            rel = abs(a - b) / max(abs(a), abs(b))
            diffs.append(f"{path}: stored {a!r}, new {b!r} (relative difference {rel:.3g})")
    elif isinstance(a, str) and isinstance(b, str) and a != b and _numeric(a) and _numeric(b):
        # a number carried as text (a CSV cell): compared as the number it spells
        _compare(float(a), float(b), path, diffs, exact)
    elif type(a) is not type(b) or a != b:
        diffs.append(f"{path}: stored {_short(a)}, new {_short(b)}")


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("nan", "inf", "-inf", "infinity", "-infinity")


def _short(x: Any) -> str:
    text = json.dumps(x)
    return text if len(text) <= 120 else text[:117] + "..."


def data_path(name: str) -> Path:
    return DATA / f"{name}.json"
