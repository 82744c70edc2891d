"""Records and files for the results-store tests, here and in tests/cli (`fabriclab results`)."""

import json
import sqlite3
from pathlib import Path

from fabriclab.record import make_record
from fabriclab.report import store


def store_record(kind="whatif", created="2026-11-20T12:00:00+00:00", **results):
    """A record as a command writes it (a what-if sweep of two rows by default), created at `created`."""
    record = make_record(kind, {"workers": "16,32", "trainer": {"sync": "ring"}},
                         results or {"rows": [{"model": "resnet50", "workers": 16, "scaling_factor": 0.9},
                                              {"model": "resnet50", "workers": 32, "scaling_factor": 0.8}]})
    record["created_utc"] = created
    return record


def strict_json(text):
    """json.loads that refuses NaN and Infinity (standard JSON only)."""
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def bad_store_files(tmp_path):
    """Files that are not a results store -> the message their use gives: text, a foreign SQLite file,
    a damaged store."""
    text = tmp_path / "notes.txt"
    text.write_text("these are my notes, not a database\n" * 200)
    foreign = tmp_path / "other.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    damaged = tmp_path / "damaged.db"
    for i in range(30):
        store.add_record(store_record(), damaged)
    data = bytearray(damaged.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # page 1 after the header: the schema table
    damaged.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(str(damaged) + suffix).unlink(missing_ok=True)
    return {text: "not an SQLite database", foreign: "not a fabriclab results store",
            damaged: "damaged|not an SQLite database"}
