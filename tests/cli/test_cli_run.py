"""`fabriclab run`: the main job ends with its conclusion (which algorithm wins where, by how much), the
record's id and store, and the next commands; it takes --store, --json and --format like every run."""

from __future__ import annotations

import json
from dataclasses import replace

from typer.testing import CliRunner

from fabriclab.cli.collectives import bench as collectives_bench
from fabriclab.cli.main import app
from fabriclab.report import store as results_store


def test_run_concludes_names_its_record_and_the_next_commands(tmp_path, monkeypatch):
    # the default's sweep takes a minute on 2 cores: two ranks and three sizes say the same things
    small = replace(collectives_bench.DEFAULT_CONFIG, num_ranks=2, sizes_bytes=(1024, 65536, 1 << 20), iters=2,
                    warmup=1)
    monkeypatch.setattr(collectives_bench, "DEFAULT_CONFIG", small)
    store, record = tmp_path / "s.db", tmp_path / "run.json"
    result = CliRunner().invoke(app, ["run", "--store", str(store), "--json", str(record), "--format", "plain"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("# algo"))
    rows = [line for line in lines if line.startswith("  ") and line.split()[1:2] and line.split()[1].isdigit()]
    assert len(rows) == 9 and all(len(line) <= len(header) for line in rows)  # streamed rows fit the header
    at = next(i for i, line in enumerate(lines) if line.startswith("conclusion: "))
    assert " wins " in lines[at] and " of 3 sizes" in lines[at]
    assert any(" wins at " in line and "x the busbw of the next best" in line for line in lines[at:])
    (stored,) = results_store.list_records(store)
    assert f"record {stored.id} in {store} (fabriclab results show {stored.id})" in result.stdout
    assert stored.record["command"] == ["fabriclab", "run", "--store", str(store), "--json", str(record),
                                        "--format", "plain"]
    assert json.loads(record.read_text())["kind"] == "collectives.bench"
    assert "next: fabriclab report" in result.stdout and "fabriclab whatif llm" in result.stdout
