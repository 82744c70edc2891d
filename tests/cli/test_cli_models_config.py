"""`fabriclab models --model FILE_OR_DIR`: the LLM a HuggingFace config.json describes, read by the reader
`whatif llm --model` and `plan --model` use, shown as `fabriclab models NAME` shows a built-in one."""

import json

from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.workload.transformer import load_model

ENV = {"FABRICLAB_STORE": "off", "COLUMNS": "80"}
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 8192,
          "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 16, "vocab_size": 128256,
          "max_position_embeddings": 4096, "hidden_act": "silu", "tie_word_embeddings": True}


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env=ENV)


def test_models_shows_the_model_of_a_config_json_file_or_folder(tmp_path):
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    spec = load_model(str(folder))
    for given in (folder, folder / "config.json"):
        result = invoke("models", "--model", str(given), "--json", str(tmp_path / "m.json"))
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[0] == f"# my-llama: {spec.num_params():,} parameters"
        assert "GFLOPs per token at seq 4096" in result.stdout
        record = json.loads((tmp_path / "m.json").read_text())
        assert record["kind"] == "models.llm" and record["results"]["spec"]["num_params"] == spec.num_params()
    assert invoke("models", "--model", "llama3-8b").stdout == invoke("models", "llama3-8b").stdout


def test_models_model_refuses_two_models_and_a_file_that_is_not_there(tmp_path):
    both = invoke("models", "llama3-8b", "--model", "llama3-70b")
    assert both.exit_code == 2 and "give one model" in both.stderr
    missing = invoke("models", "--model", str(tmp_path / "none" / "config.json"))
    assert missing.exit_code == 2 and "no such file" in missing.stderr
