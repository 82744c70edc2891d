"""`fabriclab models` with the LLMs: the list (80 columns in a pipe, numbers whole), one LLM's breakdown from
a built-in name or a config.json, the --json records and one-line errors."""

import json

import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import models as models_cli
from fabriclab.workload.transformer import list_llms, load_model
from fabriclab.workload.zoo import list_models

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)"""

    models_cli.register(app)
    return app


def invoke(app, *args: str):
    # not a terminal: plain fixed-width text, as in a pipe
    return runner.invoke(app, list(args), env={"FABRICLAB_STORE": "off", "COLUMNS": "80"})


def llm_block(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("# LLMs")):]


def test_list_has_the_cnns_then_the_llms_within_80_columns(app, tmp_path):
    result = invoke(app, "models", "--json", str(tmp_path / "models.json"))
    assert result.exit_code == 0, result.output
    block = llm_block(result.stdout)
    assert all(len(line) <= 80 for line in block), "\n".join(line for line in block if len(line) > 80)
    rows = {line.split()[0]: line.split() for line in block[2:] if line.startswith("  ")}
    assert sorted(rows) == list_llms()
    # layers, hidden, heads, experts, params (B = 1e9), active, GFLOPs per token, seq: whole, not cut
    assert rows["llama3-70b"][1:] == ["80", "8192", "64/8", "-", "70.55B", "70.55B", "481.4", "8192"]
    assert rows["mixtral-8x7b"][4:7] == ["8/2/0", "46.70B", "12.88B"]
    assert rows["deepseek-v3"][4] == "256/8/1"
    record = json.loads((tmp_path / "models.json").read_text())
    cnn = [r for r in record["results"] if r.get("family") != "llm"]
    llm = {r["model"]: r for r in record["results"] if r.get("family") == "llm"}
    assert [r["model"] for r in cnn] == list_models()
    assert sorted(llm) == list_llms()
    assert llm["llama3-8b"]["num_params"] == load_model("llama3-8b").num_params()
    assert llm["gpt3-175b"]["model_flops_per_token"] * 2048 == pytest.approx(2.20e15, rel=0.01)


def test_one_llm_breakdown(app, tmp_path):
    result = invoke(app, "models", "llama3-70b", "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert "70,553,706,496 parameters" in result.stdout
    assert "56,371,445,760" in result.stdout  # 80 x 3 x 8192 x 28672 (SwiGLU MLPs)
    assert "attention_scores" in result.stdout and "481.43" in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["kind"] == "models.llm" and record["config"] == {"model": "llama3-70b"}
    parts = {r["part"]: r for r in record["results"]["params"]}
    assert sum(r["num_params"] for r in parts.values()) == record["results"]["spec"]["num_params"]
    flops = {r["part"]: r for r in record["results"]["flops"]}
    assert flops["attention"]["forward_flops_per_token"] == 2 * 80 * parts["attention"]["params_per_layer"]


def test_moe_breakdown_names_experts_and_active_parameters(app):
    result = invoke(app, "models", "deepseek-v3")
    assert result.exit_code == 0, result.output
    assert "experts (256)" in result.stdout and "shared experts (1)" in result.stdout
    assert "active per token" in result.stdout


def test_a_config_json_path(app, tmp_path):
    config = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 4, "num_attention_heads": 16,
              "vocab_size": 1000, "max_position_embeddings": 1024, "hidden_act": "gelu"}
    path = tmp_path / "small" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    result = invoke(app, "models", str(path))
    assert result.exit_code == 0, result.output
    # 4 x (4 h^2 + 2 h 4h + 2h) + 2 V h + h
    total = 4 * (4 * 2048**2 + 2 * 2048 * 8192 + 2 * 2048) + 2 * 1000 * 2048 + 2048
    assert f"small: {total:,} parameters" in result.stdout


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0]


def test_unknown_name_lists_cnns_and_llms(app):
    result = invoke(app, "models", "llama9")
    assert_one_line_error(result, "unknown model 'llama9'; known models: alexnet")
    assert "LLMs: deepseek-v3" in result.stderr and "config.json" in result.stderr


def test_bad_config_json(app, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 64}))
    assert_one_line_error(invoke(app, "models", str(path)), "missing key 'num_attention_heads'")
    assert_one_line_error(invoke(app, "models", str(tmp_path / "none.json")), "none.json: no such file")


def test_the_listing_writes_no_store_record_and_shows_small_models_readably(app, tmp_path, monkeypatch):
    from fabriclab.cli.models import count_text

    store = tmp_path / "store.db"
    result = runner.invoke(app, ["models"], env={"FABRICLAB_STORE": str(store)})
    assert result.exit_code == 0, result.output
    assert not store.exists()  # a listing of packaged data is no run
    gpt_tiny = next(line for line in result.stdout.splitlines() if line.strip().startswith("gpt-tiny"))
    assert gpt_tiny.split()[5:8] == ["262.7k", "262.7k", "0.0016"]  # not 0.00 billion, not 0.0 GFLOPs
    assert [count_text(n) for n in (672.15e9, 4.2e6, 262_720, 512)] == ["672.15B", "4.20M", "262.7k", "512"]
