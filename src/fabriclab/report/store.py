"""The results store: one SQLite file that keeps every run's record (standard library `sqlite3` only).

Where: `--store PATH`, else the environment variable `FABRICLAB_STORE`, else
`$XDG_DATA_HOME/fabriclab/results.db` (`~/.local/share/fabriclab/results.db` when XDG_DATA_HOME is unset).
`FABRICLAB_STORE=off` keeps runs from adding records.

What: one row per record of `fabriclab.record.make_record` (kind, created_utc, config, results, versions,
git, host), kept whole as JSON, with the kind, time, git revision and host name beside it for listing.
Records are standard JSON: a non-finite float (NaN, +-Infinity) is stored as `null` (never refused:
a run's other numbers are kept), and the row keeps the dotted paths of the values so converted
(`nulled_keys`, shown by `fabriclab results show`; `make_record` already nulls them, so these are
records built elsewhere).

Safe to share: the file runs in WAL mode with a busy timeout, each record is one transaction (a run that
dies mid-write leaves nothing, not half a record) and a locked store is retried with backoff, so several
runs (or ranks) may write at once. The schema is versioned in the `meta` table: an older store is migrated
when opened, a newer one is refused. A file that is not a store (not SQLite, damaged, or another
program's database) gives a ValueError that names the file and what to do.

Points: a plan or sweep run by `report/points` keeps each finished point in the `points` table, keyed by
the run's configuration digest and the point's key (`add_points`, `stored_points`): one transaction per
batch, `INSERT OR IGNORE`, so a point is stored once whoever computed it, and `--resume` reads them back.

Try it: `fabriclab results list --store /tmp/results.db`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import random
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from fabriclab.report.store_views import (Stored, diff, export, parse_since,  # noqa: F401 (part of this API)
                                          record_problem)

SCHEMA_VERSION = 3
APPLICATION = "fabriclab"
ENV_VAR = "FABRICLAB_STORE"
OFF = "off"  # FABRICLAB_STORE=off: runs add no record (cli.common); reading commands need --store
# Seconds one statement waits for another writer's lock before sqlite3 gives up (then we retry).
BUSY_TIMEOUT_S = 10.0
# Attempts of a whole transaction on "database is locked"; with the busy timeout about a minute in all.
RETRIES = 6


def default_store_path() -> Path:
    """`$XDG_DATA_HOME/fabriclab/results.db`, or `~/.local/share/fabriclab/results.db`."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"  # XDG: relative is ignored
    return base / "fabriclab" / "results.db"


def resolve_store_path(cli_value: Path | None) -> Path:
    """The store to use: `--store` if given, else $FABRICLAB_STORE if set and not empty, else the default."""
    if cli_value is not None:
        return Path(cli_value).expanduser()
    env = os.environ.get(ENV_VAR, "").strip()
    if env == OFF:
        raise ValueError(f"{ENV_VAR}=off turns the results store off: pass --store PATH to use one")
    return Path(env).expanduser() if env else default_store_path()


SQLITE_HEADER = b"SQLite format 3\x00"


def check_store_file(path: Path) -> None:
    """Before the work: an existing store must be an SQLite file (an empty file is a new store)."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise ValueError(f"results store {path}: cannot read it ({exc.strerror or exc}); give another --store "
                         f"PATH") from None
    if head and head != SQLITE_HEADER:
        raise ValueError(f"results store {path} is not an SQLite file: give another --store PATH (a new "
                         f"file is created), or FABRICLAB_STORE=off to keep the run out of the store")


def add_record(record: dict, store: Path | None = None) -> int:
    """Add one record (a dict of `make_record`) in one transaction; returns its id."""
    clean, nulled = _standard_json(record)
    if not isinstance(clean, dict) or not isinstance(clean.get("kind"), str) or not clean["kind"]:
        raise ValueError("a record needs a non-empty 'kind', e.g. 'collectives.bench' (see fabriclab.record)")
    clean["created_utc"] = _utc_text(clean.get("created_utc"))
    git = clean.get("git") if isinstance(clean.get("git"), dict) else {}
    host = clean.get("host") if isinstance(clean.get("host"), dict) else {}
    text = json.dumps(clean, allow_nan=False, separators=(",", ":"))
    path = resolve_store_path(store)
    with _connect(path, create=True) as conn:
        def insert() -> int:
            cur = conn.execute(
                "INSERT INTO records (kind, created_utc, record_json, git_revision, hostname, nulled_keys) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (clean["kind"], clean["created_utc"], text, git.get("revision"), host.get("hostname"),
                 json.dumps(nulled)))
            return int(cur.lastrowid)
        return _transaction(conn, path, insert)


def list_records(store: Path | None = None, *, command: str | None = None, since: str | None = None,
                 ids: list[int] | None = None, now: datetime.datetime | None = None,
                 skipped: list[tuple[int, str]] | None = None) -> list[Stored]:
    """Records in id order; `command` keeps a kind and its sub-kinds (`simulate` keeps `simulate.sweep`),
    `since` a date or an age (see `parse_since`), `ids` those ids (an unknown id is an error). A row that is
    no fabriclab record (`store_views.record_problem`) is a ValueError naming it, or, when `skipped` is
    given, left out and added there as (id, what is wrong): one such row no longer hides the whole store."""
    path = resolve_store_path(store)
    if not path.exists():
        if ids:
            raise ValueError(f"no record {ids[0]}: the results store {path} does not exist yet")
        return []
    where, args = [], []
    if command:
        where.append("(kind = ? OR kind LIKE ? ESCAPE '\\')")
        args += [command, command.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ".%"]
    if since:
        where.append("created_utc >= ?")
        args.append(parse_since(since, now).isoformat(timespec="seconds"))
    if ids:  # an id beyond SQLite's 64-bit INTEGER is in no store (binding it raised OverflowError)
        storable = [int(i) for i in ids if -2**63 <= int(i) < 2**63]
        where.append(f"id IN ({','.join('?' * len(storable))})")
        args += storable
    sql = "SELECT id, record_json, nulled_keys FROM records"
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
    with _connect(path, create=False) as conn:
        rows = _read(conn, path, sql, args)
    found = []
    for row in rows:
        try:
            found.append(_stored(path, *row))
        except BadRecord as exc:
            if skipped is None:
                raise
            skipped.append((row[0], exc.problem))
    if ids:
        missing = sorted(set(int(i) for i in ids) - {s.id for s in found} - {i for i, _ in skipped or ()})
        if missing:
            raise ValueError(f"no record {', '.join(map(str, missing))} in {path}: "
                             f"`fabriclab results list` shows the ids there")
    return found


def add_points(run_key: str, items: list[tuple[str, str]], store: Path | None = None) -> int:
    """Keep the finished points `(point key, result JSON)` of the run `run_key` in one transaction; a point
    already stored is left as it was. Returns how many were new."""
    if not items:
        return 0
    path = resolve_store_path(store)
    stamp = _utc_text(None)
    with _connect(path, create=True) as conn:
        def insert() -> int:
            before = conn.total_changes
            conn.executemany("INSERT OR IGNORE INTO points (run_key, point_key, created_utc, result_json) "
                             "VALUES (?, ?, ?, ?)", [(run_key, k, stamp, text) for k, text in items])
            return conn.total_changes - before
        return _transaction(conn, path, insert)


def stored_points(run_key: str, store: Path | None = None) -> dict[str, str]:
    """The points stored for `run_key`: point key -> result JSON (empty when there is no store yet)."""
    path = resolve_store_path(store)
    if not path.exists():
        return {}
    with _connect(path, create=False) as conn:
        rows = _read(conn, path, "SELECT point_key, result_json FROM points WHERE run_key = ?", [run_key])
    return dict(rows)


def get_record(record_id: int, store: Path | None = None) -> Stored:
    """The record with this id; ValueError if there is none."""
    return list_records(store, ids=[record_id])[0]


def schema_version(store: Path | None = None) -> int:
    """The schema version of an existing store (after migrating it to this fabriclab's)."""
    path = resolve_store_path(store)
    with _connect(path, create=False) as conn:
        return _version(conn)


# -- schema and migrations -------------------------------------------------------------------------

def _v1(conn: sqlite3.Connection) -> None:
    """Schema 1: the records, whole, with their kind and time."""
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, "
                 "created_utc TEXT NOT NULL, record_json TEXT NOT NULL)")
    conn.execute("INSERT INTO meta (key, value) VALUES ('application', ?)", (APPLICATION,))
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '0')")


def _v2(conn: sqlite3.Connection) -> None:
    """Schema 2: git revision, host name and the nulled keys beside each record; indexes for listing."""
    for column in ("git_revision TEXT", "hostname TEXT", "nulled_keys TEXT NOT NULL DEFAULT '[]'"):
        conn.execute(f"ALTER TABLE records ADD COLUMN {column}")
    for rid, text in conn.execute("SELECT id, record_json FROM records").fetchall():
        try:
            record = json.loads(text)
        except ValueError:
            continue  # reported by name when read
        git, host = record.get("git") or {}, record.get("host") or {}
        conn.execute("UPDATE records SET git_revision = ?, hostname = ? WHERE id = ?",
                     (git.get("revision"), host.get("hostname"), rid))
    conn.execute("CREATE INDEX records_kind_time ON records (kind, created_utc)")
    conn.execute("CREATE INDEX records_time ON records (created_utc)")


def _v3(conn: sqlite3.Connection) -> None:
    """Schema 3: the finished points of plans and sweeps, per run configuration (`add_points`)."""
    conn.execute("CREATE TABLE points (run_key TEXT NOT NULL, point_key TEXT NOT NULL, created_utc TEXT NOT NULL, "
                 "result_json TEXT NOT NULL, PRIMARY KEY (run_key, point_key))")


# MIGRATIONS[i] takes a store from schema i to i + 1 (0: an empty file).
MIGRATIONS = (_v1, _v2, _v3)
assert len(MIGRATIONS) == SCHEMA_VERSION


def migrate(conn: sqlite3.Connection, path: Path, *, target: int = SCHEMA_VERSION) -> None:
    """Bring the store to schema `target` in one transaction (a second process waits, then finds it done)."""
    def step() -> None:
        version = _version(conn, path)
        for i in range(version, target):
            MIGRATIONS[i](conn)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(i + 1),))
    _transaction(conn, path, step)


def _version(conn: sqlite3.Connection, path: Path | None = None) -> int:
    """The store's schema version: 0 for an empty database; ValueError for a foreign or newer one."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables.discard("sqlite_sequence")
    if not tables:
        return 0
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
    if meta.get("application") != APPLICATION or "records" not in tables:
        raise ValueError(f"{path} is an SQLite database but not a fabriclab results store (it has the tables "
                         f"{', '.join(sorted(tables))}): pass another --store or FABRICLAB_STORE, or move it away")
    text = str(meta.get("schema_version", "0")).strip()
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"the results store {path}: its meta table's schema_version is {text!r}, not a schema "
                         f"number (0 to {SCHEMA_VERSION}): the file is damaged or not fabriclab's; move it away "
                         f"(a new store starts empty) or pass another --store")
    version = int(text)
    if version > SCHEMA_VERSION:
        raise ValueError(f"the results store {path} has schema {version}, written by a newer fabriclab (this one "
                         f"reads up to {SCHEMA_VERSION}): upgrade fabriclab or pass another --store")
    return version


# -- connections, transactions, errors -------------------------------------------------------------

@contextmanager
def _connect(path: Path, *, create: bool) -> Iterator[sqlite3.Connection]:
    """An open, migrated connection in autocommit mode (transactions are explicit), closed afterwards."""
    if path.is_dir():
        raise ValueError(f"the results store {path} is a folder: pass a file, e.g. --store {path / 'results.db'}")
    if create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"cannot create the folder of the results store {path} ({exc.strerror}): "
                             f"pass --store PATH or set FABRICLAB_STORE") from None
    elif not path.exists():
        raise ValueError(f"there is no results store at {path}: runs add their records there, or pass --store")
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise _user_error(path, exc) from None
    try:
        version = _retry(path, lambda: _version(conn, path))  # first: a foreign file is left as it was
        if create or version < SCHEMA_VERSION:
            _retry(path, lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        if version < SCHEMA_VERSION:
            migrate(conn, path)
        yield conn
    except sqlite3.DatabaseError as exc:
        raise _user_error(path, exc) from None
    finally:
        conn.close()


def _transaction(conn: sqlite3.Connection, path: Path, work):
    """Run `work()` inside BEGIN IMMEDIATE .. COMMIT; retried with backoff while the store is locked."""
    def once():
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = work()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result
    return _retry(path, once)


def _read(conn: sqlite3.Connection, path: Path, sql: str, args: list) -> list[tuple]:
    return _retry(path, lambda: conn.execute(sql, args).fetchall())


def _retry(path: Path, work):
    for attempt in range(RETRIES):
        try:
            return work()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if attempt == RETRIES - 1:
                raise ValueError(f"the results store {path} stayed locked by another process for over "
                                 f"{RETRIES * BUSY_TIMEOUT_S:.0f} s: try again, or pass another --store") from None
            time.sleep(0.05 * 2 ** attempt * (1 + random.random()))  # jitter: writers do not retry in step


def _user_error(path: Path, exc: sqlite3.Error) -> ValueError:
    text = str(exc)
    if "not a database" in text or "file is encrypted" in text:
        return ValueError(f"{path} is not a fabriclab results store (not an SQLite database): pass another "
                          f"--store or FABRICLAB_STORE, or move the file away")
    if "malformed" in text or "corrupt" in text:
        return ValueError(f"the results store {path} is damaged ({text}): move it away (a new store starts "
                          f"empty) or recover it with `sqlite3 {path} .recover`")
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return ValueError(f"cannot open the results store {path} for writing ({text}): check its permissions "
                          f"or pass another --store")
    return ValueError(f"the results store {path}: {text}")


# -- records as standard JSON ----------------------------------------------------------------------

class BadRecord(ValueError):
    """A stored row that is no fabriclab record; `problem` says what is wrong in a few words."""

    def __init__(self, message: str, problem: str):
        super().__init__(message)
        self.problem = problem


def _stored(path: Path, rid: int, text: str, nulled: str) -> Stored:
    """The row as a Stored record, or a ValueError naming it and what is wrong with it."""
    try:
        record = json.loads(text)
        keys = json.loads(nulled or "[]")
    except (ValueError, TypeError):
        problem = "not valid JSON"
    else:
        problem = record_problem(record) or (None if isinstance(keys, list) else "its nulled keys are not a list")
    if problem is not None:
        raise BadRecord(f"record {rid} in {path} is not a fabriclab record ({problem}; written by another "
                        f"program, or damaged): delete that row, e.g. `sqlite3 {path} 'DELETE FROM records "
                        f"WHERE id = {rid}'`", problem)
    return Stored(id=rid, record=record, nulled_keys=tuple(map(str, keys)))


def _standard_json(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """A copy with plain JSON types only; non-finite floats become None, their dotted paths listed."""
    nulled: list[str] = []

    def walk(v: Any, where: str) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
            return v
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            nulled.append(where)
            return None
        if isinstance(v, dict):
            return {str(k): walk(x, f"{where}.{k}" if where else str(k)) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if hasattr(v, "item") and callable(v.item):  # numpy scalars
            return walk(v.item(), where)
        raise ValueError(f"a record holds {type(v).__name__} at {where or 'top level'}: records hold JSON "
                         f"types only (make_record converts dataclasses, paths and arrays)")

    return walk(value, path), nulled


def _utc_text(value: Any) -> str:
    """An ISO time in UTC to the second (sortable as text); now when missing."""
    if value is None:
        stamp = datetime.datetime.now(datetime.timezone.utc)
    else:
        try:
            stamp = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"a record's created_utc {value!r} is not an ISO time, e.g. "
                             f"2026-11-01T12:00:00+00:00") from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp.astimezone(datetime.timezone.utc).isoformat(timespec="seconds")
