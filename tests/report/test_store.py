"""The results store: location, schema and migration, concurrent and dying writers, bad files, NaN (the
`fabriclab results` commands: tests/cli/test_cli_results.py)."""

import csv
import datetime
import io
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fabriclab.report import store
from store_samples import bad_store_files, store_record, strict_json

UTC = datetime.timezone.utc


# -- location ----------------------------------------------------------------------------------------

def test_store_path_prefers_option_then_environment_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICLAB_STORE", str(tmp_path / "env.db"))
    assert store.resolve_store_path(tmp_path / "cli.db") == tmp_path / "cli.db"
    assert store.resolve_store_path(None) == tmp_path / "env.db"
    monkeypatch.delenv("FABRICLAB_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store.resolve_store_path(None) == tmp_path / "xdg" / "fabriclab" / "results.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # the XDG spec says: ignore a relative path
    assert store.resolve_store_path(None) == Path.home() / ".local/share/fabriclab/results.db"
    monkeypatch.setenv("FABRICLAB_STORE", "off")
    with pytest.raises(ValueError, match="off"):
        store.resolve_store_path(None)


# -- records in and out ------------------------------------------------------------------------------

def test_records_round_trip_and_filter_by_command_and_time(tmp_path):
    path = tmp_path / "deep" / "results.db"
    ids = [store.add_record(store_record("whatif", "2026-10-01T00:00:00+00:00"), path),
           store.add_record(store_record("simulate.sweep", "2026-11-20T10:00:00Z"), path),
           store.add_record(store_record("simulate.collective", "2026-11-20T11:30:00+02:00"), path)]
    assert ids == [1, 2, 3]
    now = datetime.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    assert [s.kind for s in store.list_records(path)] == ["whatif", "simulate.sweep", "simulate.collective"]
    assert [s.id for s in store.list_records(path, command="simulate")] == [2, 3]
    assert [s.id for s in store.list_records(path, command="simulate.sweep")] == [2]
    assert store.list_records(path, command="sim") == []  # a command name, not any prefix
    assert [s.id for s in store.list_records(path, since="2026-11-01")] == [2, 3]
    assert [s.id for s in store.list_records(path, since="2h", now=now)] == [2]  # 11:30+02:00 is 09:30 UTC
    assert [s.id for s in store.list_records(path, since="3h", now=now)] == [2, 3]
    got = store.get_record(2, path)
    assert got.created_utc == "2026-11-20T10:00:00+00:00"
    assert got.record["config"] == {"workers": "16,32", "trainer": {"sync": "ring"}}
    assert got.record["results"]["rows"][1]["scaling_factor"] == 0.8
    with pytest.raises(ValueError, match="no record 9"):
        store.get_record(9, path)
    with pytest.raises(ValueError, match="--since 'yesterday'"):
        store.list_records(path, since="yesterday")
    assert store.list_records(tmp_path / "missing.db") == []  # reading never creates a store
    assert not (tmp_path / "missing.db").exists()


def test_schema_is_versioned_in_meta_and_the_file_runs_in_wal_mode(tmp_path):
    path = tmp_path / "r.db"
    store.add_record(store_record(), path)
    conn = sqlite3.connect(path)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta == {"application": "fabriclab", "schema_version": str(store.SCHEMA_VERSION)}
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_non_finite_numbers_are_stored_as_null_and_listed(tmp_path):
    path = tmp_path / "r.db"
    record = store_record()
    # make_record nulls NaN itself; a record built elsewhere may still hold them
    record["results"] = {"median": float("nan"), "rows": [{"t_s": float("inf")}, {"t_s": -float("inf")}], "ok": 1.5}
    rid = store.add_record(record, path)
    got = store.get_record(rid, path)
    assert got.record["results"] == {"median": None, "rows": [{"t_s": None}, {"t_s": None}], "ok": 1.5}
    assert got.nulled_keys == ("results.median", "results.rows[0].t_s", "results.rows[1].t_s")
    raw = sqlite3.connect(path).execute("SELECT record_json FROM records").fetchone()[0]
    strict_json(raw)
    strict_json(store.export([got], "json"))


def test_a_record_needs_a_kind_and_json_types(tmp_path):
    with pytest.raises(ValueError, match="kind"):
        store.add_record({"config": {}}, tmp_path / "r.db")
    with pytest.raises(ValueError, match="object at config.x"):
        store.add_record(store_record() | {"config": {"x": object()}}, tmp_path / "r.db")


# -- migration ---------------------------------------------------------------------------------------

# Schema 1 exactly as it shipped: records with kind and time only.
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, created_utc TEXT NOT NULL,
                      record_json TEXT NOT NULL);
INSERT INTO meta VALUES ('application', 'fabriclab'), ('schema_version', '1');
"""


def test_an_older_store_is_migrated_when_opened(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_1)
    old = store_record("bench.sim")
    conn.execute("INSERT INTO records (kind, created_utc, record_json) VALUES (?, ?, ?)",
                 (old["kind"], old["created_utc"], json.dumps(old)))
    conn.commit()
    conn.close()
    [got] = store.list_records(path)
    assert got.id == 1 and got.record == old and got.nulled_keys == ()
    assert store.schema_version(path) == store.SCHEMA_VERSION == 3
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT git_revision, hostname FROM records").fetchone() == (
        (old["git"] or {}).get("revision"), old["host"]["hostname"])
    conn.close()
    assert store.add_record(store_record(), path) == 2


def test_a_newer_store_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "new.db"
    store.add_record(store_record(), path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match=r"schema 99, written by a newer fabriclab .*upgrade fabriclab"):
        store.list_records(path)
    with pytest.raises(ValueError, match="newer fabriclab"):
        store.add_record(store_record(), path)


# -- files that are not a store ----------------------------------------------------------------------

def test_a_foreign_or_damaged_file_gives_a_value_error_naming_it(tmp_path):
    for path, message in bad_store_files(tmp_path).items():
        before = path.read_bytes()
        with pytest.raises(ValueError, match=message) as err:
            store.list_records(path)
        assert str(path) in str(err.value) and ("--store" in str(err.value) or "move it" in str(err.value))
        with pytest.raises(ValueError, match=message):
            store.add_record(store_record(), path)
        assert path.read_bytes() == before  # never "repaired" by writing over someone's file


# -- several writers, dying writers ------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from fabriclab.record import make_record
    from fabriclab.report.store import add_record
    path, who, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for i in range(count):
        add_record(make_record("test.concurrent", {"writer": who, "i": i}, {"value": who * 1000 + i}), path)
""")


def test_concurrent_writers_from_several_processes_lose_nothing(tmp_path):
    path, writers, count = tmp_path / "shared.db", 4, 15
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w), str(count)]) for w in range(writers)]
    assert [p.wait(timeout=240) for p in procs] == [0] * writers
    found = store.list_records(path)
    assert [s.id for s in found] == list(range(1, writers * count + 1))
    assert sorted(s.record["results"]["value"] for s in found) == sorted(
        w * 1000 + i for w in range(writers) for i in range(count))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


DIES_AT_COMMIT = textwrap.dedent("""
    import os, signal, sqlite3, sys
    from fabriclab.record import make_record
    from fabriclab.report import store
    connect = sqlite3.connect
    def dying_connect(*args, **kwargs):
        conn = connect(*args, **kwargs)
        def trace(sql):
            if sql.strip().upper() == "COMMIT" and os.environ.get("ARMED"):
                os.kill(os.getpid(), signal.SIGKILL)  # the run dies after its INSERT, before COMMIT
            if sql.startswith("INSERT INTO records"):
                os.environ["ARMED"] = "1"
        conn.set_trace_callback(trace)
        return conn
    sqlite3.connect = dying_connect
    store.add_record(make_record("test.half", {}, {"big": list(range(100000))}), sys.argv[1])
""")


def test_a_run_that_dies_mid_write_leaves_no_half_record(tmp_path):
    path = tmp_path / "r.db"
    store.add_record(store_record(), path)
    done = subprocess.run([sys.executable, "-c", DIES_AT_COMMIT, str(path)], timeout=120)
    assert done.returncode == -9
    assert [s.kind for s in store.list_records(path)] == ["whatif"]
    assert store.add_record(store_record(), path) == 2  # and the lock died with it
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


# -- export and diff ---------------------------------------------------------------------------------

def test_export_csv_has_one_line_per_result_row_and_json_the_records(tmp_path):
    path = tmp_path / "r.db"
    store.add_record(store_record(), path)
    store.add_record(store_record("bench.whatif", results=None) | {"results": {"points": 270, "ours_s": 0.02}}, path)
    found = store.list_records(path)
    rows = list(csv.DictReader(io.StringIO(store.export(found, "csv"))))
    assert [(r["id"], r["kind"], r.get("workers"), r.get("scaling_factor")) for r in rows] == [
        ("1", "whatif", "16", "0.9"), ("1", "whatif", "32", "0.8"), ("2", "bench.whatif", "", "")]
    assert rows[0]["config.trainer.sync"] == "ring" and rows[2]["points"] == "270"
    assert rows[0]["created_utc"] == "2026-11-20T12:00:00+00:00" and rows[0]["hostname"]
    records = strict_json(store.export(found, "json"))
    assert [r["id"] for r in records] == [1, 2] and records[1]["results"] == {"points": 270, "ours_s": 0.02}
    with pytest.raises(ValueError, match="csv or json"):
        store.export(found, "xml")


def test_diff_pairs_rows_by_their_leading_columns(tmp_path):
    path = tmp_path / "r.db"
    a = store_record()
    b = store_record()
    b["config"]["trainer"]["sync"] = "butterfly"
    b["results"]["rows"] = [{"model": "resnet50", "workers": 32, "scaling_factor": 0.6},
                            {"model": "resnet50", "workers": 64, "scaling_factor": 0.5}]
    ra, rb = (store.get_record(store.add_record(r, path), path) for r in (a, b))
    changes = {d.key: d for d in store.diff(ra, rb)}
    assert set(changes) == {"config.trainer.sync", "results.rows[model=resnet50,workers=16]",
                            "results.rows[model=resnet50,workers=32].scaling_factor",
                            "results.rows[model=resnet50,workers=64]"}
    moved = changes["results.rows[model=resnet50,workers=32].scaling_factor"]
    assert (moved.a, moved.b) == (0.8, 0.6) and moved.relative_change == pytest.approx(-0.25)
    assert (changes["results.rows[model=resnet50,workers=16]"].b, changes["results.rows[model=resnet50,workers=64]"].a) == (None, None)
    assert store.diff(ra, ra) == []


def test_a_row_that_parses_but_is_no_record_is_skipped_when_asked_else_named(tmp_path):
    path = tmp_path / "r.db"
    store.add_record(store_record(), path)
    with sqlite3.connect(path) as conn:
        for text in ('{}', 'null', '{"kind": "x", "created_utc": "2026-11-20T12:00:00+00:00", "git": {"revision": 7}}'):
            conn.execute("INSERT INTO records (kind, created_utc, record_json) VALUES ('x', '2026', ?)", (text,))
    skipped: list = []
    assert [s.id for s in store.list_records(path, skipped=skipped)] == [1]
    assert skipped == [(2, "no kind"), (3, "not a JSON object but null"), (4, "git.revision 7 is not a string")]
    with pytest.raises(ValueError, match=r"record 2 in .* is not a fabriclab record \(no kind;"):
        store.list_records(path)
    with pytest.raises(ValueError, match="record 3 in"):
        store.get_record(3, path)
    assert store.list_records(path, ids=[1, 3], skipped=[])[0].id == 1  # a bad id asked for: skipped, not unknown
    assert store.record_problem(store_record()) is None
    assert store.record_problem({"kind": "x", "created_utc": "yesterday"}) == "created_utc 'yesterday' is not an ISO time"
