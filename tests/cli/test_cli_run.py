"""`fabriclab run`: the main job ends with its conclusion (per size the winner and by how much beyond the
noise, or "within noise" and the spread), the record's id and store, and the next commands; it takes
--store, --json and --format like every run."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from typer.testing import CliRunner

from fabriclab.cli.collectives import bench as collectives_bench
from fabriclab.cli.main import app
from fabriclab.report import store as results_store


def test_run_concludes_names_its_record_and_the_next_commands(tmp_path, monkeypatch):
    # the default's sweep takes tens of seconds on 2 cores: two ranks and three sizes, rounds of 2 iterations
    # up to 10 or 0.5 s a size, say the same things
    small = replace(collectives_bench.DEFAULT_CONFIG, num_ranks=2, sizes_bytes=(1024, 65536, 1 << 20), iters=2,
                    warmup=1, max_iters=10, max_time_s=0.5)
    monkeypatch.setattr(collectives_bench, "DEFAULT_CONFIG", small)
    store, record = tmp_path / "s.db", tmp_path / "run.json"
    result = CliRunner().invoke(app, ["run", "--store", str(store), "--json", str(record), "--format", "plain"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("# algo"))
    rows = [line for line in lines if line.startswith("  ") and line.split()[1:2] and line.split()[1].isdigit()]
    assert len(rows) == 9 and all(len(line) <= len(header) for line in rows)  # streamed rows fit the header
    at = next(i for i, line in enumerate(lines) if line.startswith("conclusion: "))
    assert re.fullmatch(r"conclusion: a winner at \d of 3 sizes, \d within noise", lines[at])
    # per size: the winner and its margin beyond the noise, or "within noise" and the spread
    per_size = lines[at + 2:at + 5]
    assert [line.split()[0] for line in per_size] == ["1KB", "64KB", "1MB"]
    verdicts = (r"\S+ wins by [\d.]+x over \S+ \(>= [\d.]+x beyond noise\)",
                r"within noise \(spread \+-[\d.]+%\): \S+(, \S+)*; gap [\d.]+%")
    assert all(re.fullmatch(r" *\S+  n=\d+ +(" + "|".join(verdicts) + ")", line) for line in per_size), per_size
    end = next(i for i, line in enumerate(lines) if line.startswith("record "))
    assert end > at + 5 and all(len(line) <= 80 for line in lines[at:end])  # the conclusion fits 80 columns
    (stored,) = results_store.list_records(store)
    assert f"record {stored.id} in {store} (fabriclab results show {stored.id})" in result.stdout
    assert stored.record["command"] == ["fabriclab", "run", "--store", str(store), "--json", str(record),
                                        "--format", "plain"]
    written = json.loads(record.read_text())
    assert written["kind"] == "collectives.bench" and len(written["verdicts"]) == 3
    assert written["config"]["max_iters"] == 10 and written["config"]["confidence"] == 0.95
    assert all(2 <= r["iters"] <= 10 and "time_us_ci_high" in r for r in written["results"])
    assert "next: fabriclab report" in result.stdout and "fabriclab whatif llm" in result.stdout
