"""`fabriclab models` and `fabriclab profile` (with `profile add-cost`): output, files, one-line errors.

The commands are registered on a fresh app here, so the tests do not depend on `cli/main.py`'s wiring.
"""

import json

import pytest
import torch
import typer
from typer.testing import CliRunner

from fabriclab.cli import models as models_cli
from fabriclab.cli import profile as profile_cli
from fabriclab.workload.addcost import AddCost
from fabriclab.workload.profile import load_profile
from fabriclab.workload.zoo import list_models

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)"""

    models_cli.register(app)
    profile_cli.register(app)
    return app


def invoke(app, *args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.output


def test_models_table(app, tmp_path):
    result = invoke(app, "models", "--json", str(tmp_path / "zoo.json"))
    assert result.exit_code == 0, result.output
    for name in list_models():
        assert name in result.stdout
    assert "25,557,032" in result.stdout and "109,482,240" in result.stdout
    assert "8.178" in result.stdout  # resnet50_v1.5 GFLOPs per sample
    record = json.loads((tmp_path / "zoo.json").read_text())
    rows = {row["model"]: row for row in record["results"]}
    assert rows["vgg16"]["num_params"] == 138_357_544 and rows["vgg16"]["param_bytes"] == 4 * 138_357_544


def test_models_layer_table(app):
    result = invoke(app, "models", "resnet50")
    assert result.exit_code == 0, result.output
    assert "layer4.2.conv3" in result.stdout and "1,048,576" in result.stdout


def test_models_unknown(app):
    assert_one_line_error(invoke(app, "models", "resnet18"), "known models: alexnet")


@pytest.mark.parametrize("args, fragment", [
    (("--model", "resnet18"), "unknown model 'resnet18'; known models: alexnet"),
    ((), "give --model NAME"),
    (("--model", "alexnet", "--batch-size", "0"), "batch size must be >= 1"),
    (("--model", "bert_base", "--input-size", "1000"), "sequence length 1000 is outside 1..512"),
    (("--model", "alexnet", "--device", "tpu"), "use cpu, cuda or cuda:N"),
    (("--model", "alexnet", "--repeats", "0"), "1 <= --repeats"),
    (("--model", "alexnet", "--threads", "0"), "--threads 0: give 1..1024"),
    (("--model", "resnet50", "--batch-size", "100000"), "of memory, more than the"),
    (("--model", "alexnet", "--out", "/proc/a.json"), "--out /proc/a.json: not a regular file location"),
])
def test_profile_bad_input(app, args, fragment):
    assert_one_line_error(invoke(app, "profile", *args), fragment)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_profile_without_cuda(app):
    assert_one_line_error(invoke(app, "profile", "--model", "alexnet", "--device", "cuda"), "CUDA is not available")


def test_profile_writes_every_file(app, tmp_path):
    out, bk, trace, record = (tmp_path / name for name in ("a.json", "a.bk.log", "a.trace.json", "rec.json"))
    result = invoke(app, "profile", "--model", "googlenet", "--batch-size", "2", "--input-size", "32",
                    "--warmup", "0", "--repeats", "2", "--threads", "1", "--out", str(out),
                    "--bk-log", str(bk), "--trace", str(trace), "--json", str(record), "--format", "plain")
    assert result.exit_code == 0, result.output
    assert "hooked iteration 2/2" in result.stderr  # progress
    assert "samples/s" in result.stdout and "slowest layers" in result.stdout
    profile = load_profile(str(out))
    assert profile.model == "googlenet" and len(profile.grads) == 173 and profile.extra["repeats"] == 2
    assert len(load_profile(str(bk), iteration_s=profile.iteration_s).grads) == 173
    assert any(e.get("cat") == "gradient" for e in json.loads(trace.read_text())["traceEvents"])
    assert json.loads(record.read_text())["results"]["num_grads"] == 173


def test_add_cost(app, tmp_path):
    out = tmp_path / "add.log"
    result = invoke(app, "profile", "add-cost", "--device", "cpu", "--max-size", "1KB", "--out", str(out),
                    "--format", "plain")
    assert result.exit_code == 0, result.output
    table = AddCost.from_log(out)
    assert table.size_bytes.tolist() == [40, 80, 160, 320, 640]
    assert "GB/s" in result.stdout


def test_add_cost_bad_size(app):
    assert_one_line_error(invoke(app, "profile", "add-cost", "--max-size", "10B"), "below the smallest size")
