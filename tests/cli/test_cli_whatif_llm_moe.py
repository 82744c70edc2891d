"""`whatif llm` with MoE parallel folding, dispatchers and the memory options of the published recipes: the
options reach the step, bad ones are refused in one line that says what to change, and the advice of a job that
does not fit names options that free memory (applied, the job fits or needs less)."""

import json
import re

from typer.testing import CliRunner

from fabriclab.cli.main import app

RUN = CliRunner()
FSDP_70B = ["whatif", "llm", "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "64", "--tp", "1",
            "--zero", "3", "--seq", "8192", "--gbs", "256", "--no-sequence-parallel"]


def whatif(*args: str):
    return RUN.invoke(app, list(args))


def test_deepseek_v3_on_256_gb200_as_the_recipe_runs_it(tmp_path):
    # Megatron-Bridge's deepseek_v3_pretrain_256gpu_gb200_fp8mx_config: TP1 PP4 VP4 EP64, mla_up_proj recomputed
    out = tmp_path / "r.json"
    done = whatif("whatif", "llm", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--gpus", "256", "--tp", "1",
                  "--pp", "4", "--vp", "4", "--ep", "64", "--gbs", "4096", "--seq", "4096", "--precision", "fp8",
                  "--recompute", "selective", "--recompute-modules", "mla_up_proj", "--moe-dispatcher", "deepep",
                  "--ep-overlap", "--grad-dtype", "bf16", "--json", str(out))
    assert done.exit_code == 0, done.output
    assert "EP64 ETP1" in done.output and "recompute selective mla_up_proj" in done.output
    record = json.loads(out.read_text())
    assert record["config"]["etp"] == 1 and record["config"]["recompute_modules"] == ["mla_up_proj"]
    names = {e["communicator"] for e in record["results"]["communicators"]}
    assert "ep_intra" in names  # EP64 inside one NVLink domain of 64: DeepEP's NVLink step only
    assert all(len(line) <= 80 for line in done.output.splitlines() if str(tmp_path) not in line)


def test_an_fsdp_job_that_offloads_its_activations_as_the_recipe_does():
    # llama3_70b_pretrain_64gpu_gb200_bf16_config: Megatron-FSDP, 20 of 80 layers' activations to Grace
    done = whatif(*FSDP_70B, "--offload-activations", "20", "--grad-dtype", "bf16")
    assert done.exit_code == 0, done.output
    assert "offload 20 layers" in done.output and "host" in done.output
    share = whatif(*FSDP_70B, "--offload-activations", "25%", "--grad-dtype", "bf16")
    assert share.exit_code == 0 and "offload 20 layers" in share.output


def _advice(output: str) -> list[tuple[list[str], float]]:
    """The options a refusal advises, each with what it frees."""
    text = " ".join(output.split()).split("; try ", 1)[1]
    return [(option.split(), float(gb)) for option, gb in re.findall(r"((?:--[\w-]+ [\w,.%]+ ?)+) \(frees ([\d.]+) GB\)",
                                                                      text)]


def _need(output: str) -> float:
    return float(re.search(r"needs ([\d.]+) \+-", " ".join(output.split())).group(1))


def test_the_advice_of_a_refused_job_names_options_that_free_what_they_say():
    refused = whatif(*FSDP_70B)
    assert refused.exit_code == 2 and "does not fit" in refused.output
    advice = _advice(refused.output)
    assert len(advice) >= 3 and not any(opts == ["--recompute", "selective"] for opts, _ in advice)
    for options, gb in advice[:3]:
        again = whatif(*FSDP_70B, *options)
        assert again.exit_code in (0, 2), again.output
        if again.exit_code == 2:  # still short, by less: what the option freed
            assert _need(again.output) < _need(refused.output) - 0.9 * gb
    assert whatif(*FSDP_70B, *advice[0][0]).exit_code == 0  # the best one fits


def test_bad_moe_options_say_what_to_change():
    cases = [
        (["--model", "mixtral-8x7b", "--gpus", "16", "--tp", "2", "--ep", "32"], "must divide tp x cp x dp"),
        (["--model", "mixtral-8x7b", "--gpus", "16", "--ep", "8", "--moe-dispatcher", "flex"], "--moe-dispatcher 'flex'"),
        (["--gpus", "16", "--etp", "2"], "--etp 2 needs an MoE model"),
        (["--gpus", "16", "--recompute-modules", "layernorm"], "add --recompute selective"),
        (["--gpus", "16", "--recompute", "selective", "--recompute-modules", "moe_act"], "no such module"),
        (["--gpus", "16", "--offload-activations", "1.5"], "--offload-activations '1.5'"),
        (["--gpus", "16", "--offload-activations", "32"], "offload at most 31 layers"),
    ]
    for args, message in cases:
        done = whatif("whatif", "llm", *args)
        assert done.exit_code == 2 and message in " ".join(done.output.split()), (args, done.output)
