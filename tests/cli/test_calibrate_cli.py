"""`fabriclab calibrate nccl-tests` and the cluster prediction behind `simulate collective --cluster`."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriclab.cli.calibrate import app
from fabriclab.fabric.cluster import load_cluster
from fabriclab.nccl.logs import parse_nccl_tests

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason=f"shared nccl-tests logs not at {LOGS}")


def _logs(*counts):
    return [str(LOGS / f"nccl_{n}.log") for n in counts]


@needs_logs
def test_calibrate_writes_a_cluster_and_prints_residuals(tmp_path):
    out = tmp_path / "a100.json"
    result = CliRunner().invoke(app, ["nccl-tests", *_logs(1, 2, 4, 8, 16), "--out", str(out), "--format", "plain",
                                      "--json", str(tmp_path / "rec.json")])
    assert result.exit_code == 0, result.output
    cluster = load_cluster(out)
    assert cluster.name == "a100" and cluster.fit["rows_fitted"] == 28 * 3 + 25
    assert 0.5 < cluster.server.nic_efficiency < 0.9
    assert "nic_efficiency" in result.output and "nccl_16.log" in result.output
    assert "1 rank moves no data" in result.output
    assert "fitted rows: 16 GPUs, >= 64 MB" in result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("  nccl_")]
    assert len(rows) == 28 * 3 + 25 and all(float(r[4]) > 0 for r in rows)  # no `measured 0` for 8 B
    assert next(r for r in rows if r[:3] == ["nccl_2.log", "2", "8B"])[4] == "0.0009249"
    bands = result.output.split("# |error| per size band", 1)[1].splitlines()
    assert bands[1].split() == ["#", "GPUs", "<=", "8", "KB", "16-512", "KB", "1-32", "MB", ">=", "64", "MB"]
    assert bands[2].split() == ["2", "4.4", "/", "7.0", "29.2", "/", "40.6", "2.5", "/", "5.4", "1.2", "/", "4.6"]
    assert ("note: 2 GPUs, 512KB -> 1MB: the model's time falls (82.47 -> 60.76 us) where NCCL's tuning "
            "switches ring/LL -> ring/LL128") in result.output
    record = json.loads((tmp_path / "rec.json").read_text())
    assert record["results"]["fitted_rows"]


@needs_logs
def test_check_and_hold_out_sizes(tmp_path):
    out = tmp_path / "c.json"
    result = CliRunner().invoke(app, ["nccl-tests", *_logs(2, 4, 8), "--check", _logs(16)[0],
                                      "--hold-out-sizes", "1MB:1GB", "--out", str(out), "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows16 = [line.split(",") for line in result.output.splitlines() if line.startswith("nccl_16.log,16,")]
    assert len(rows16) == 25  # 14 fitted, then the 11 held out (1 MB - 1 GB) in a table of their own
    assert [r[2] for r in rows16[-11:]] == ["1MB", "2MB", "4MB", "8MB", "16MB", "32MB", "64MB", "128MB", "256MB",
                                            "512MB", "1GB"]
    assert "held-out rows: 16 GPUs, 1-16 MB" in result.output
    plain = CliRunner().invoke(app, ["nccl-tests", *_logs(2, 4), "--check", _logs(8)[0], "--out", str(out)])
    assert plain.exit_code == 0 and "held-out rows: 8 GPUs, >= 64 MB" in plain.output
    assert "no run spans several servers" in plain.output


def test_bad_logs_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("hello\n")
    result = CliRunner().invoke(app, ["nccl-tests", str(bad), "--out", str(tmp_path / "c.json")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: ") and str(bad) in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()
    into_dir = CliRunner().invoke(app, ["nccl-tests", str(bad), "--out", str(tmp_path)])
    assert into_dir.exit_code == 2


def _predict(cluster, gpus: int, sizes: list[int], fmt, expect_exit: int = 0) -> dict:
    """`simulate collective --cluster` through the CLI; prints its output (for capsys), returns the record."""
    import json
    import tempfile

    from fabriclab.cli.main import app as main_app

    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "r.json"
        args = ["simulate", "collective", "--cluster", str(cluster), "--gpus", str(gpus),
                "--sizes", ",".join(f"{s}B" for s in sizes), "--json", str(record)] + (["--format", fmt] if fmt else [])
        result = CliRunner().invoke(main_app, args, env={"FABRICLAB_STORE": "off", "COLUMNS": "200"})
        print(result.output, end="")
        assert result.exit_code == expect_exit, result.output
        return json.loads(record.read_text()) if expect_exit == 0 else {}


@needs_logs
def test_prediction_in_nccl_tests_layout_reads_back(tmp_path, capsys):
    out = tmp_path / "a100.json"
    assert CliRunner().invoke(app, ["nccl-tests", *_logs(2, 4, 8, 16), "--out", str(out)]).exit_code == 0
    sizes = [1 << k for k in range(10, 33)]
    record = _predict(out, 32, sizes, "nccl-tests")
    text = capsys.readouterr().out
    assert text.startswith("# fabriclab prediction, not a measurement: allreduce on 32 GPUs (4 servers x 8)")
    (run,) = parse_nccl_tests(text, "pred")
    assert run.num_servers == 4 and [r.size_bytes for r in run.rows] == sizes
    assert record["config"]["num_gpus"] == 32 and len(record["results"]) == len(sizes)
    # 2-16 GPU logs show trees only with LL: 32 GPUs' tree/LL128 rows rest on NCCL's constants, with a range
    tree = [r for r in record["results"] if r["algorithm"] == "tree/LL128"]
    assert tree and all("tree.LL128 latencies" in r["prior_parameters"] for r in tree)
    assert all(r["busbw_low_GBps"] < r["busbw_GBps"] < r["busbw_high_GBps"] for r in tree)
    assert "# fabriclab rests on priors (tree.LL128 latencies" in text
    _predict(out, 16, [1 << 20, 1 << 30], "plain")
    plain = capsys.readouterr().out
    assert "ring/" in plain and "busbw range" in plain
    _predict(out, 12, sizes, None, expect_exit=2)
    assert "12 GPUs do not fill whole servers" in capsys.readouterr().out


@needs_logs
def test_sharp_and_the_carried_network_hop(tmp_path):
    out = tmp_path / "a100.json"
    legacy = CliRunner().invoke(app, ["nccl-tests", *_logs(2, 16), "--sharp", "--out", str(out)])
    assert legacy.exit_code == 2 and "give --nccl-version 2.9 or later" in legacy.output
    result = CliRunner().invoke(app, ["nccl-tests", *_logs(8, 16), "--sharp", "--nccl-version", "2.18.3",
                                      "--out", str(out), "--format", "plain"])
    assert result.exit_code == 0, result.output
    cluster = load_cluster(out)
    assert cluster.network.sharp is True
    assert not load_cluster(_calibrated(tmp_path)).network.sharp
    plain = CliRunner().invoke(app, ["nccl-tests", *_logs(8, 16), "--out", str(out), "--format", "plain"])
    line = next(x for x in plain.output.splitlines() if "tree.LL128.net_step_s" in x)
    assert line.split()[-4:] == ["+", "fitted", "net", "hop"] and "8.5 us" in line


def _calibrated(tmp_path):
    out = tmp_path / "plain.json"
    assert CliRunner().invoke(app, ["nccl-tests", *_logs(2, 16), "--out", str(out)]).exit_code == 0
    return out


@needs_logs
def test_the_runs_nccl_settings_and_tuner_reach_the_cluster_file(tmp_path):
    tuner = tmp_path / "tuner.textproto"
    tuner.write_text("communicator_configs {\n node_range: { min: 2 max: 3 }\n rank_per_node_range: { min: 8 }\n"
                     " coll_configs {\n  coll_type: COLL_ALL_REDUCE\n  msg_size_tuning_rules {\n"
                     "   per_rank_message_size: { min: 0 }\n"
                     "   coll_tuning_spec: { algorithm: ALGO_RING protocol: PROTO_SIMPLE num_channel: 4 }\n"
                     "  }\n }\n}\n")
    out = tmp_path / "c.json"
    result = CliRunner().invoke(app, ["nccl-tests", *_logs(2), "--check", _logs(16)[0], "--out", str(out),
                                      "--nccl-env", "NCCL_PROTO=^LL", "--nccl-tuner", str(tuner),
                                      "--nccl-version", "2.18.3", "--format", "plain"])
    assert result.exit_code == 0, result.output
    cluster = load_cluster(out)
    assert cluster.library.nccl_env == {"NCCL_PROTO": "^LL"} and len(cluster.library.tuner) == 1
    picks = {line.split()[3] for line in result.output.splitlines() if line.startswith("  nccl_16.log")}
    assert picks == {"ring/Simple"}, picks  # the tuner's one rule on 2 servers of 8
    bad = CliRunner().invoke(app, ["nccl-tests", *_logs(2), "--out", str(out), "--nccl-env", "NCCL_ALGO=Ring,Bus"])
    assert bad.exit_code != 0 and "'Bus' is not one of Ring, Tree" in bad.output and "Traceback" not in bad.output
    missing = CliRunner().invoke(app, ["nccl-tests", *_logs(2), "--out", str(out), "--nccl-tuner",
                                       str(tmp_path / "none.textproto")])
    assert missing.exit_code != 0 and "cannot read it" in missing.output
