"""`fabriclab chakra example | show | run`: output, records, the costed trace, one-line errors.

The group is registered on a fresh app here, so the tests do not depend on `cli/main.py`'s wiring.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import chakra as chakra_cli
from fabriclab.workload.chakra import read_et

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)"""

    chakra_cli.register(app)
    return app


@pytest.fixture
def demo(app, tmp_path):
    result = invoke(app, "chakra", "example", "--out", str(tmp_path / "demo"))
    assert result.exit_code == 0, result.output
    assert "wrote 4 files" in result.stdout
    return tmp_path / "demo"


def invoke(app, *args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0]


def test_show_lists_ranks_kinds_and_communicators(app, demo, tmp_path):
    result = invoke(app, "chakra", "show", str(demo), "--json", str(tmp_path / "show.json"))
    assert result.exit_code == 0, result.output
    assert "4 ranks" in result.stdout and "communicators" in result.stdout
    assert "8.9346" in result.stdout  # the critical path of the durations in the file: compute only
    results = json.loads((tmp_path / "show.json").read_text())["results"]
    assert [r["ops"] for r in results["ranks"]] == [13] * 4
    comms = {c["communicator"]: c for c in results["communicators"]}
    assert comms["pp"]["collectives"] == {"send": 4, "recv": 4} and comms["world"]["group_sizes"] == [4]
    assert comms["tp"]["bytes"] == 12 * (16 << 20)


def test_run_costs_the_step_on_a_cluster_and_writes_the_costed_trace(app, demo, tmp_path):
    result = invoke(app, "chakra", "run", str(demo), "--cluster", "dgx-h100", "--out", str(tmp_path / "costed"),
                    "--json", str(tmp_path / "run.json"))
    assert result.exit_code == 0, result.output
    assert "step on dgx-h100" in result.stdout and "36 comm ops costed" in result.stdout
    record = json.loads((tmp_path / "run.json").read_text())
    results = record["results"]
    assert record["config"]["cluster"] == "dgx-h100" and set(results["comm_s"]) == {"pp", "tp", "world"}
    costed = read_et(tmp_path / "costed")
    assert max(g.critical_path_s() for g in costed) == pytest.approx(results["step_s"], rel=1e-12)
    assert all(op.duration_s > 0 for op in costed[0].ops if op.kind == "comm")


def test_run_reads_the_files_one_by_one_too(app, demo):
    files = [f"{demo}.{r}.et" for r in range(4)]
    result = invoke(app, "chakra", "run", *files, "--cluster", "tx-gaia-25gbe", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["title"].startswith("step on tx-gaia-25gbe")


def test_a_foreign_trace_with_astra_sims_groups(app, demo, tmp_path):
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"1": [0, 1, 2, 3]}))
    result = invoke(app, "chakra", "show", str(demo), "--comm-groups", str(groups))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args, fragment", [
    (["show", "{tmp}/nothing"], "nothing.0.et exists"),
    (["show", "{tmp}/bad.0.et"], "bad.0.et: not a Chakra execution trace (truncated varint at byte 0)"),
    (["run", "{tmp}/bad.0.et", "--cluster", "no-such-cluster"], "no such file and no preset"),
    (["show", "{demo}", "--comm-groups", "{tmp}/bad.0.et"], "--comm-groups"),
    (["run", "{demo}", "--num-gpus", "0"], "--num-gpus"),
    (["example", "--out", "{tmp}/x", "--ranks", "5"], "even number"),
])
def test_bad_input_is_one_error_line(app, demo, tmp_path, args, fragment):
    (tmp_path / "bad.0.et").write_bytes(b"\xff")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{demo}", str(demo)) for a in args]
    assert_one_line_error(invoke(app, "chakra", *argv), fragment)


def test_the_example_holds_only_what_astra_sim_runs(demo):
    from fabriclab.workload.etfile import read_et_file

    types = {n.attr("comm_type") for r in range(4) for n in read_et_file(f"{demo}.{r}.et").nodes}
    assert types - {None} == {0, 2, 5, 6, 7} and not types & {1, 9}  # no REDUCE, no BARRIER


def test_a_foreign_trace_of_one_rank_is_costed_on_the_jobs_gpus(app, tmp_path):
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.nccl.predict import collective_times
    from fabriclab.workload.etfile import COMM_COLL_NODE, EtAttr, EtNode, write_et_file

    node = EtNode(id=0, name="ar", type=COMM_COLL_NODE, duration_micros=7,
                  attrs=(EtAttr("comm_type", "int64", 0), EtAttr("comm_size", "int64", 1 << 20)))
    write_et_file(tmp_path / "ar.0.et", [node])
    result = invoke(app, "chakra", "run", str(tmp_path / "ar.0.et"), "--recost", "--num-gpus", "8",
                    "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    step = json.loads((tmp_path / "r.json").read_text())["results"]["step_s"]
    assert step == pytest.approx(float(collective_times(cluster_preset("dgx-h100"), 8, [1 << 20], "allreduce")[0][0]))
    assert_one_line_error(invoke(app, "chakra", "run", str(tmp_path / "ar.0.et"), "--num-gpus", "0"), "--num-gpus")
    (tmp_path / "ar.9.et").write_bytes((tmp_path / "ar.0.et").read_bytes())
    assert_one_line_error(invoke(app, "chakra", "run", str(tmp_path / "ar"), "--num-gpus", "4"),
                          "--num-gpus 4: 4 ranks, but the trace has rank 9")
