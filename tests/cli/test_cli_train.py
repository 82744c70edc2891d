"""`fabriclab train` and `fabriclab data make` from the command line: output, record, trace, errors.

The commands are mounted on an app of their own here (the lead registers them in `cli/main.py`)."""

from __future__ import annotations

import csv
import io
import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import data as data_cli
from fabriclab.cli import train as train_cli

app = typer.Typer()
train_cli.register(app)
data_cli.register(app)
runner = CliRunner()
# A profile small enough to replay in a fraction of a second (times in ms, sizes in bytes).
TINY = ["--steps", "3", "--warmup", "1", "--np", "2", "--batch-size", "4", "--timeout", "30"]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("profile") / "tiny.json"
    grads = [{"name": f"g{i}", "size_bytes": 4000 * (i + 1), "ready_s": 0.002 * (i + 1)} for i in range(6)]
    path.write_text(json.dumps({"model": "tiny", "device": "test", "batch_size": 2, "iteration_s": 0.02,
                                "grads": grads}))
    return path


def test_train_replay_ours_and_ddp_prints_tf_cnn_lines_and_writes_record_and_trace(tmp_path, profile_file):
    record, trace = tmp_path / "run.json", tmp_path / "trace.json"
    result = invoke("train", "--replay", str(profile_file), "--runtime", "ours,ddp", "--sync", "reduce:native",
                    "--overlap", "forward", "--bucket", "8KB", "--first-bucket", "4KB", "--trace", str(trace),
                    "--json", str(record), "--display-every", "2", "--format", "plain", *TINY)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("total images/sec:") == 2 and "Step\tImg/sec\ttotal_loss" in out
    # the step lines of both runtimes (steps 1 and 2 of 3), then the baseline's, then the totals and table
    lines = out.splitlines()
    steps = [line.split("\t")[0] for line in lines if "\timages/sec: " in line]
    assert steps == ["[ours] 1", "[ddp] 1", "[ours] 2", "[ddp] 2", "[1 rank] 1", "[1 rank] 2"]
    assert "(jitter = " in out and lines.index(next(x for x in lines if x.startswith("[1 rank] 2"))) < \
        lines.index(next(x for x in lines if x.startswith("total images/sec:")))
    header = next(line for line in lines if line.startswith("# runtime"))
    for column in ("vs ddp", "scaling", "compute ms", "exposed ms", "MB sent", "net GB/s", "CPU %"):
        assert column in header
    assert "warm-up ours: step 1 of 1" in result.stderr
    runtimes = json.loads(record.read_text())["results"]["runtimes"]
    assert set(runtimes) == {"ours", "ddp"} and runtimes["ours"]["params_agree"]
    assert runtimes["ours"]["scaling_factor"] > 0 and runtimes["ours"]["bytes_sent"] > 0
    names = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]}
    assert any(n.startswith("forward layers.") for n in names) and any(n.startswith("params bucket") for n in names)
    assert any(n.startswith("reduce bucket") for n in names)


@pytest.mark.parametrize("mode", [["--sync", "ps:servers=2", "--overlap", "backward"],
                                  ["--sync", "allreduce:ring", "--overlap", "none", "--compression", "bf16"]])
def test_train_other_modes_with_a_dataset(tmp_path, mode):
    folder = tmp_path / "data"
    made = invoke("data", "make", "--out", str(folder), "--shards", "4", "--images", "16", "--image-size", "32")
    assert made.exit_code == 0 and "4 shards" in made.output
    result = invoke("train", "--model", "resnet50", "--data", str(folder), "--no-baseline", "--format", "csv",
                    *TINY, *mode)
    assert result.exit_code == 0, result.output
    assert "total images/sec:" in result.stderr  # human lines go to stderr when stdout is CSV
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["runtime"], r["params"]) for r in rows] == [("ours", "agree")]


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "6", "--np", "4"], "batch size 6 does not split over 4 ranks"),
    (["--model", "lenet"], "unknown model 'lenet'"),
    (["--overlap", "forward", "--sync", "ps:servers=2"], "only reduce and sharded sync have"),
    (["--sync", "sharded:native"], "sharded needs a reduce-scatter"),
    (["--overlap", "sideways"], "unknown overlap"),
    (["--runtime", "horovod"], "unknown or repeated runtime"),
    (["--data", "/nonexistent/shards"], "does not exist"),
    (["--lr", "nan"], "--lr nan: give a finite number"),
    (["--steps", "-1"], "need 1 <= steps"),
    (["--np", "100000"], "local ranks on this machine"),
    (["--batch-size", "40000"], "of memory, more than the"),
    (["--fusion", "fifo"], "unknown fusion 'fifo': use one of time-or-size, horovod, ddp, none"),
    (["--trace", "/proc/trace.json"], "--trace /proc/trace.json: not a regular file location"),
])
def test_train_rejects_bad_input_in_one_line(args, message):
    result = runner.invoke(app, ["train", *args])
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.strip().count("\n") == 0 and result.stdout == ""


def test_train_names_a_corrupt_shard(tmp_path):
    folder = tmp_path / "data"
    invoke("data", "make", "--out", str(folder), "--shards", "2", "--images", "8", "--image-size", "32")
    shard = folder / "train-00001-of-00002"
    shard.write_bytes(shard.read_bytes()[:-7])
    result = invoke("train", "--model", "resnet50", "--data", str(folder), "--no-baseline", *TINY)
    assert result.exit_code == 1
    assert "train-00001-of-00002: record" in result.stderr and "truncated" in result.stderr


def test_bench_train_runs_each_mode_beside_ddp(tmp_path, profile_file):
    from fabriclab.cli import bench as bench_cli

    bench_app = typer.Typer()
    bench_cli.register(bench_app)
    record = tmp_path / "modes.json"
    result = runner.invoke(bench_app, ["bench", "train", "--modes", "allreduce:ring/backward,reduce:cb/forward/fp16",
                                       "--replay", str(profile_file), "--np", "2", "--batch-size", "4",
                                       "--steps", "2", "--warmup", "1", "--timeout", "30", "--json", str(record)],
                           env={"COLUMNS": "200"})  # `bench train` (cli/bench/train.py) reads its table
    assert result.exit_code == 0, result.output
    assert "allreduce:ring/backward" in result.stdout and "ours/ddp" in result.stdout
    rows = json.loads(record.read_text())["results"]
    assert [r["mode"] for r in rows] == ["allreduce:ring/backward", "reduce:cb/forward/fp16"]
    for r in rows:
        assert r["params_agree"] and r["ratio"] == pytest.approx(r["ours_images_per_sec"] / r["ddp_images_per_sec"])
        assert r["cpu_ms"] > 0 and r["ddp_cpu_ms"] > 0
    bad = runner.invoke(bench_app, ["bench", "train", "--modes", "allreduce:ring", "--replay", str(profile_file)])
    assert bad.exit_code == 2 and "sync/overlap" in bad.output
    bad = runner.invoke(bench_app, ["bench", "train", "--modes", "ps:servers=2/forward", "--replay", str(profile_file)])
    assert bad.exit_code == 2 and "forward" in bad.output
