"""Views of stored records: flattened keys, `--since` times, CSV / JSON export and the diff of two runs.

Pure functions on `Stored` records (no database here; `report.store` reads and writes them).

* `flatten` turns nested config and results into dotted keys (`trainer.sync`, `rows[fabric=25gbe,
  workers=4,algo=ring].images_per_sec`): a list of rows is labelled by its leading columns, as many as it
  takes to tell the rows apart (the inputs come first in every fabriclab row), else by position.
* `export(records, "csv")` writes one line per result row (or one per record when its results are not a
  list of rows) with the record's id, kind, time, git revision and host, its flattened config, and the
  row's fields; `"json"` writes a list of the records, each with its `id`.
* `diff(a, b)` lists every key whose value differs, with the relative change of numbers.

Try it: `fabriclab results diff 1 2`.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import re
import shlex
from typing import Any

EXPORT_FORMATS = ("csv", "json")
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_AGE_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Kinds whose command is not the kind with spaces for dots.
ROW_PRESENT = "(row)"  # diff value of a row that only one record has
_COMMANDS = {"train.bench": "fabriclab train", "train.llm": "fabriclab train --model {model}",
             "models.layers": "fabriclab models {model}", "models.llm": "fabriclab models {model}",
             "plan.llm": "fabriclab plan --model {model}", "simulate.cluster": "fabriclab simulate collective "
             "--cluster {cluster}", "validate.llm": "fabriclab validate emulated --workload llm",
             "validate.emulated": "fabriclab validate emulated", "bench.sim.scale": "fabriclab bench sim --scale",
             "bench.sim.peer": "fabriclab bench sim --peer simgrid", "bench.train_llm": "fabriclab bench train-llm",
             "bench.plan_llm": "fabriclab bench plan-llm", "bench.llm_step": "fabriclab bench llm-step",
             "bench.astra_sim": "fabriclab bench astra-sim", "profile": "fabriclab profile"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stored:
    """One record as kept in the store."""

    id: int
    """Its number in the store (never reused)."""
    record: dict
    """The record: kind, created_utc, config, results, versions, git, host."""
    nulled_keys: tuple[str, ...] = ()
    """Dotted paths of non-finite floats (NaN, Infinity) that were stored as null."""

    @property
    def kind(self) -> str:
        return self.record["kind"]

    @property
    def created_utc(self) -> str:
        return self.record["created_utc"]


# The parts of a record every view reads, and the JSON types they must have (None: absent is fine too).
_PARTS = {"config": dict, "versions": dict, "git": dict, "host": dict, "command": (list, str)}


def record_problem(record: Any) -> str | None:
    """Why a stored record cannot be listed, shown, exported or reported (a record that parses as JSON but is
    `{}`, `null` or holds parts of the wrong type, written by another program or damaged), or None."""
    if not isinstance(record, dict):
        return f"not a JSON object but {type(record).__name__ if record is not None else 'null'}"
    if not isinstance(record.get("kind"), str) or not record["kind"]:
        return "no kind" if record.get("kind") is None else f"kind {record['kind']!r} is not a name"
    stamp = record.get("created_utc")
    try:
        datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return f"created_utc {stamp!r} is not an ISO time"
    if not isinstance(stamp, str):
        return f"created_utc {stamp!r} is not an ISO time"
    for part, types in _PARTS.items():
        if record.get(part) is not None and not isinstance(record[part], types):
            return f"{part} is a {type(record[part]).__name__}, not a JSON object"
    revision = (record.get("git") or {}).get("revision")
    if revision is not None and not isinstance(revision, str):
        return f"git.revision {revision!r} is not a string"
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiffRow:
    """One key whose value differs between two records."""

    key: str
    """Dotted key, e.g. `config.trainer.sync` or `results.rows[workers=4].images_per_sec`."""
    a: Any
    """Its value in the first record (None when absent there)."""
    b: Any
    """Its value in the second record (None when absent there)."""
    relative_change: float | None
    """(b - a) / |a| when both are numbers and a is not 0; else None."""


def parse_since(text: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """`2026-11-01` (UTC), `2026-11-01T12:00` or an age such as `30m`, `3h`, `1d`, `2w` -> a UTC time."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    age = _AGE.match(text)
    if age:
        return now - datetime.timedelta(seconds=float(age.group(1)) * _AGE_S[age.group(2)])
    try:
        stamp = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: give a date (2026-11-01, UTC), a time (2026-11-01T12:00) or an "
                         f"age (30m, 3h, 1d, 2w)") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp.astimezone(datetime.timezone.utc)


def command_of(record: dict) -> str:
    """The command that wrote a record: its `command` when recorded, else the command its kind stands for
    (`plan.llm`: `fabriclab plan --model llama3-70b`, never a command that does not exist)."""
    command = record.get("command")
    if isinstance(command, list):
        return shlex.join(str(c) for c in command)
    if isinstance(command, str) and command:
        return command
    kind = record.get("kind", "")
    known = _COMMANDS.get(kind)
    if known is None:
        return "fabriclab " + kind.replace(".", " ")
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    try:  # a record from before commands were recorded: its kind's command with the config's values
        return known.format(**{k: v for k, v in config.items() if isinstance(v, (str, int, float))})
    except (KeyError, IndexError, ValueError):
        return known.split(" {")[0].split(" --")[0] if "{" in known else known


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys to scalars (and lists of scalars); lists of dicts get labelled items (see module doc)."""
    out: dict[str, Any] = {}

    def walk(v: Any, where: str) -> None:
        if isinstance(v, dict) and v:
            for k, x in v.items():
                walk(x, f"{where}.{k}" if where else str(k))
        elif isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
            for label, x in zip(row_labels(v), v):
                walk(x, f"{where}[{label}]")
        else:
            out[where] = v
    walk(value, prefix)
    return out


def row_labels(rows: list, other: list | None = None) -> list[str]:
    """Labels of a list's items: `k=v,...` of the fewest leading keys that tell the dicts apart (in
    `other` too, when given); the position when no prefix does."""
    keys = _label_keys(rows, other or [])
    return [_label(r, keys) for r in rows] if keys else [str(i) for i in range(len(rows))]


def _label_keys(rows: list, other: list) -> list[str] | None:
    if not rows or not all(isinstance(r, dict) for r in rows + other):
        return None
    keys = list(rows[0])
    for n in range(1, len(keys) + 1):
        if all(len({_label(r, keys[:n]) for r in group}) == len(group) for group in (rows, other)):
            return keys[:n]
    return None


def _label(row: dict, keys: list[str]) -> str:
    return ",".join(f"{k}={_cell(row.get(k))}" for k in keys)


def result_rows(results: Any) -> list[dict]:
    """A record's results as rows: the list itself, its `rows`, the `rows` of each of its `runs`,
    else one row of the flattened results."""
    if isinstance(results, list) and results and all(isinstance(r, dict) for r in results):
        return [flatten(r) for r in results]
    if isinstance(results, dict):
        rows = results.get("rows")
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            return [flatten(r) for r in rows]
        runs = results.get("runs")
        if isinstance(runs, list) and runs and all(isinstance(r, dict) and isinstance(r.get("rows"), list)
                                                   for r in runs):
            return [flatten(row) for run in runs for row in run["rows"]]
    flat = flatten(results)
    return [flat] if flat and flat != {"": None} else []


# A list of numbers longer than this is summarised (count, min, median, max), not shown value by value.
LONG_LIST = 8


def summarise_numbers(values: list) -> dict | None:
    """`{count, min, median, max}` of a list of numbers (None entries skipped); None if it is not one."""
    nums = sorted(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    if not nums or len(nums) != sum(v is not None for v in values):
        return None
    mid = len(nums) // 2
    median = nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2
    return {"count": len(nums), "min": nums[0], "median": median, "max": nums[-1]}


def _scalar(value: Any) -> Any:
    """A value for a key/value table: a long list of numbers as its summary text, others as they are."""
    if isinstance(value, list) and len(value) > LONG_LIST:
        summary = summarise_numbers(value)
        if summary:
            return (f"{summary['count']} values: min {summary['min']:.6g}, median {summary['median']:.6g}, "
                    f"max {summary['max']:.6g}")
    return value


def result_tables(results: Any, *, summarise: bool = True) -> list[tuple[str, list[dict]]]:
    """A record's results as named tables for people: a list of rows (or `rows`, or the rows of `runs`)
    as one table; else each list of dicts and each dict of dicts as a table of its own (a `name` column
    for the dict's keys), and the remaining values as one `key` / `value` table, long lists of numbers
    summarised (count, min, median, max; with `summarise=False` kept as lists, for a figure)."""
    cell = _scalar if summarise else (lambda v: v)
    if isinstance(results, list) and results and all(isinstance(r, dict) for r in results):
        return _row_tables("", results, cell)
    if isinstance(results, dict) and isinstance(results.get("rows"), list) and results["rows"] and all(
            isinstance(r, dict) for r in results["rows"]):
        rest = {k: v for k, v in results.items() if k != "rows"}
        more = [t for t in result_tables(rest, summarise=summarise) if t[1]] if rest else []
        return _row_tables("", results["rows"], cell) + more
    if isinstance(results, list) or (isinstance(results, dict) and "runs" in results):
        rows = result_rows(results)
        if rows or not isinstance(results, dict):
            return [("", [{k: cell(v) for k, v in r.items()} for r in rows])] if rows else []
    if not isinstance(results, dict):
        return [("", [{"value": results}])] if results is not None else []
    tables, pairs = [], []
    for key, value in results.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append((key, [{k: cell(x) for k, x in flatten(v).items()} for v in value]))
        elif (isinstance(value, dict) and len(value) > 1 and all(isinstance(v, dict) for v in value.values())):
            tables.append((key, [{"name": name} | {k: cell(x) for k, x in flatten(v).items()}
                                 for name, v in value.items()]))
        elif isinstance(value, list) and not value:
            continue
        else:
            flat = flatten(_summarised(value) if summarise else value, key)
            pairs += [{"key": k, "value": cell(v)} for k, v in flat.items()]
    return ([("", pairs)] if pairs else []) + tables


def _row_tables(name: str, rows: list[dict], cell) -> list[tuple[str, list[dict]]]:
    """Rows as a table of their plain fields, and each field holding a list of dicts as a table of its own
    whose first column names the row it belongs to."""
    nested = [k for k in dict.fromkeys(k for r in rows for k in r)
              if any(isinstance(r.get(k), list) and r[k] and all(isinstance(x, dict) for x in r[k]) for r in rows)]
    labels = row_labels(rows)
    main = [{k: cell(v) for k, v in flatten({k: v for k, v in r.items() if k not in nested}).items()}
            for r in rows]
    tables = [(name, main)]
    for key in nested:
        child = [{"row": label} | {k: cell(v) for k, v in flatten(item).items()}
                 for label, r in zip(labels, rows) for item in (r.get(key) or [])]
        tables.append((f"{name}.{key}" if name else key, child))
    return tables


def _summarised(value: Any) -> Any:
    """`value` with every long list of numbers inside it replaced by its summary text."""
    if isinstance(value, dict):
        return {k: _summarised(v) for k, v in value.items()}
    return _scalar(value) if isinstance(value, list) else value


def export(records: list[Stored], fmt: str) -> str:
    """The records as CSV (one line per result row) or JSON (a list of records with their ids)."""
    if fmt == "json":
        return json.dumps([{"id": s.id, **s.record, "nulled_keys": list(s.nulled_keys)} for s in records],
                          indent=1) + "\n"
    if fmt != "csv":
        raise ValueError(f"--format {fmt!r}: export writes {' or '.join(EXPORT_FORMATS)}")
    lines: list[dict] = []
    for s in records:
        r = s.record
        head = {"id": s.id, "kind": s.kind, "created_utc": s.created_utc,
                "git_revision": (r.get("git") or {}).get("revision"), "git_dirty": (r.get("git") or {}).get("dirty"),
                "hostname": (r.get("host") or {}).get("hostname")}
        head.update(flatten(r.get("config") or {}, "config"))
        rows = result_rows(r.get("results"))
        lines += [head | row for row in rows] or [head]
    header: dict[str, None] = {}
    for line in lines:
        header.update(dict.fromkeys(line))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(header), restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: _cell(v) for k, v in line.items()} for line in lines)
    return buf.getvalue()


def diff(a: Stored, b: Stored) -> list[DiffRow]:
    """Every flattened key of the two records (config, results, versions, git, host) whose value differs."""
    def flat(s: Stored, other: Stored) -> dict[str, Any]:
        out = {"kind": s.kind, "created_utc": s.created_utc}
        for part in ("config", "results", "versions", "git", "host"):
            mine, theirs = s.record.get(part), other.record.get(part)
            out.update(_flatten_against(mine, theirs, part))
        return out
    fa, fb = flat(a, b), flat(b, a)
    rows = []
    for key in list(fa) + [k for k in fb if k not in fa]:
        va, vb = fa.get(key), fb.get(key)
        if va != vb or (key in fa) != (key in fb):
            rows.append(DiffRow(key=key, a=va, b=vb, relative_change=_relative(va, vb)))
    return rows


def _flatten_against(mine: Any, theirs: Any, prefix: str) -> dict[str, Any]:
    """`flatten`, but lists of rows are labelled so that the same labels fit both records."""
    out: dict[str, Any] = {}

    def walk(v: Any, w: Any, where: str) -> None:
        if isinstance(v, dict) and v:
            for k, x in v.items():
                walk(x, w.get(k) if isinstance(w, dict) else None, f"{where}.{k}")
        elif isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
            other = w if isinstance(w, list) and any(isinstance(x, (dict, list)) for x in w) else None
            keys = _label_keys(v, other or [])
            labels = [_label(x, keys) for x in v] if keys else [str(i) for i in range(len(v))]
            theirs = [_label(x, keys) for x in other] if keys and other else [str(i) for i in range(len(w or []))]
            theirs_by = dict(zip(theirs, other or w or []))
            for label, x in zip(labels, v):
                if other is not None and label not in theirs_by:
                    out[f"{where}[{label}]"] = ROW_PRESENT  # one line for a row the other lacks
                else:
                    walk(x, theirs_by.get(label), f"{where}[{label}]")
        else:
            out[where] = v
    walk(mine, theirs, prefix)
    return out


def _relative(a: Any, b: Any) -> float | None:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return (b - a) / abs(a) if numbers and a else None


def _cell(value: Any) -> str:
    """A value as one CSV cell or label: JSON for lists, empty for None, repr-free floats."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
