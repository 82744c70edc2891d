"""`fabriclab bench simai`: bad input is one error line (always); `--measured` re-reads a stored record and prints
its times beside fabriclab's current prediction, on 80 columns, without SimAI; where SimAI's binaries are
(marked `simai`), a 32-GPU all-reduce runs once and writes its record.

The group is registered on a fresh app here, so the tests do not depend on `cli/main.py`'s wiring.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import bench as bench_cli

runner = CliRunner()


@pytest.fixture(scope="module")
def app(make_group_app) -> typer.Typer:
    return make_group_app(bench_cli)


def invoke(app, *args: str, env: dict | None = None):
    return runner.invoke(app, ["bench", "simai", *args], env={"COLUMNS": "80", "FABRICLAB_STORE": "off", **(env or {})})


def simai_here() -> bool:
    from fabriclab.bench.simai.runner import find_simai

    try:
        find_simai()
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("args, fragment", [
    (["--simai", "/nonexistent/simai"], "--simai /nonexistent/simai: no SimAI there"),
    (["--gpus", "20"], "20 GPUs: give whole servers of 8"),
    (["--fabrics", "torus"], "--fabrics torus: 'torus' is not a fabric"),
    (["--oversubscription", "3"], "oversubscription 3"),
    (["--collectives", "bcast"], "collective 'bcast'"),
    (["--sizes", "16Mb"], "invalid size"),
    (["--repeats", "0"], "--repeats"),
    (["--timeout", "0s"], "--timeout 0s"),
    (["--routing", "spray"], "routing 'spray'"),
])
def test_bad_input_is_one_error_line(app, args, fragment):
    result = invoke(app, *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_without_simai_the_error_says_how_to_give_it(app, tmp_path):
    result = invoke(app, env={"FABRICLAB_SIMAI": str(tmp_path)})
    assert result.exit_code == 2 and "FABRICLAB_SIMAI" in result.stderr and "--simai" in result.stderr


def stored(tmp_path) -> str:
    run = {"time_s": 250e-6, "wall_s": 2.0, "peak_rss_MiB": 786.0, "exit_code": 0, "note": "", "error": "",
           "flows": {"flows": 15872, "in_flight_per_nic_mean": 1.7, "ports_per_connection_mean": 62.0}}
    case = {"num_gpus": 32, "fabric": "fat-tree", "oversubscription": 4, "collective": "alltoall",
            "size_bytes": 64 << 20}
    record = {"kind": "bench.simai", "config": {"repeats": 2},
              "results": {"cases": [{"case": case, "ns3": {"runs": [run, {**run, "time_s": 260e-6}]},
                                     "analytical": {"time_s": 1.5e-3, "wall_s": 0.02},
                                     "fabriclab": {"time_s": 1.0, "algorithm": "old", "wall_s": 0.0}}]}}
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(record))
    return str(path)


def test_measured_times_beside_the_current_prediction_on_80_columns(app, tmp_path):
    from fabriclab.bench.simai.compare import predict
    from fabriclab.bench.simai.inputs import SimaiCase

    out = tmp_path / "again.json"
    result = invoke(app, "--measured", stored(tmp_path), "--json", str(out), "--format", "table",
                    env={"FABRICLAB_SIMAI": str(tmp_path / "no-simai-needed")})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines() if str(tmp_path) not in line) <= 80
    now = predict(SimaiCase(num_gpus=32, fabric="fat-tree", oversubscription=4, collective="alltoall",
                            size_bytes=64 << 20))["time_s"]
    assert "255.0" in result.stdout and "250.0-260.0" in result.stdout and f"{now * 1e6:.1f}" in result.stdout
    assert f"{255e-6 / now:.3f}" in result.stdout and "15872" in result.stdout
    record = json.loads(out.read_text())
    assert record["kind"] == "bench.simai" and record["config"]["measured"].endswith("fit.json")
    assert record["results"]["cases"][0]["fabriclab"]["time_s"] == pytest.approx(now)


def test_measured_refuses_a_file_of_another_kind(app, tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"kind": "bench.astra_sim", "results": {"ratio": 1}}')
    result = invoke(app, "--measured", str(other))
    assert result.exit_code == 2 and "not a record of kind bench.simai" in result.stderr


@pytest.mark.simai
@pytest.mark.skipif(not simai_here(), reason="SimAI's binaries are not here (set FABRICLAB_SIMAI, or put them in "
                    "../shared/tools/simai)")
def test_one_allreduce_runs_in_simai_and_writes_its_record(app, tmp_path):
    result = invoke(app, "--repeats", "1", "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert "ns-3 run 1/1" in result.stderr and "analytical" in result.stderr
    (case,) = json.loads((tmp_path / "r.json").read_text())["results"]["cases"]
    assert case["case"]["label"] == "32 fat-tree 1:1 allreduce 16MB" and case["ns3"]["ok"] == 1
    assert 0.8 < case["ratio"] < 1.5 and case["ns3"]["runs"][0]["flows"]["flows"] > 1000
