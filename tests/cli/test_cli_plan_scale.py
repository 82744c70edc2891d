"""`fabriclab plan` / `whatif` at today's scale on the command line: NCCL's choice by default, --radix,
--nics-per-server / --rails, the --nic swap, zoo models, compute labels, refusals as one line. No test
reads the terminal width (COLUMNS is fixed; the checks read notes and JSON)."""

import json
from fractions import Fraction


from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import PlanSpec
from fabriclab.workload.profile import load_profile
from plan_app import invoke


def _rows(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["results"]["rows"]


def test_default_algo_is_nccls_choice_and_algo_overrides_it():
    rows = _rows(invoke("plan", "--gpus", "256", "--gpus-per-server", "8", "--fabrics", "400g-ndr",
                        "--bisection", "1", "--json", "-"))
    assert [r["algo"] for r in rows] == ["nccl"] and "tree" in rows[0]["library_choice"]
    ring = _rows(invoke("plan", "--gpus", "256", "--gpus-per-server", "8", "--fabrics", "400g-ndr",
                        "--bisection", "1", "--algo", "ring", "--json", "-"))
    assert ring[0]["algo"] == "ring" and ring[0]["scaling_factor"] < rows[0]["scaling_factor"]


def test_radix_nics_per_server_and_rails():
    rows = _rows(invoke("plan", "--gpus", "512", "--gpus-per-server", "8", "--nics-per-server", "8", "--rails",
                        "--fabrics", "400g-ndr", "--bisection", "1", "--radix", "16", "--algo", "ring",
                        "--json", "-"))
    (row,) = rows
    # 512 NICs on 16-port switches: 2 levels take 16 x 8 = 128, so 3 levels
    assert (row["levels"], row["radix"], row["num_nics"], row["rails"]) == (3, 16, 512, True)
    assert row["num_switch_ports_bought"] == row["num_switches"] * 16


def test_zoo_model_plans_and_every_output_names_its_compute():
    result = invoke("plan", "--model", "bert_base", "--gpus", "64", "--fabrics", "100gbe", "--format", "plain")
    assert result.exit_code == 0, result.output
    assert "compute: V100 training FLOP rate" in result.stdout and "bert_base" in result.stdout
    assert "server price left out" in result.stdout


def test_uneven_gpu_count_suggests_plan_options_not_internal_names():
    result = invoke("plan", "--gpus", "100", "--fabrics", "100gbe", "--bisection", "1/4", "--format", "plain")
    assert result.exit_code == 2
    assert "--gpus 96 or 104" in result.stderr and "hosts=" not in result.stderr
    assert "hosts_per_leaf=" not in result.stderr


def test_hierarchical_at_16k_is_refused_up_front_in_one_line():
    result = invoke("plan", "--gpus", "16384", "--gpus-per-server", "8", "--fabrics", "400g-ndr",
                    "--algo", "hierarchical:lower=ring:upper=ring:group=8")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "million messages" in lines[0] and "nccl" in lines[0]


def test_nic_swap_on_a_cluster_says_what_was_swapped():
    result = invoke("plan", "--cluster", "a100-hdr", "--nic", "NDR", "--gpus", "64", "--fabrics", "ndr",
                    "--format", "plain")
    assert result.exit_code == 0, result.output
    assert "instead of its 8 x 200 Gb/s NICs" in result.stdout and "a100-hdr+NDR" in result.stdout
    assert "converted to A100-SXM4-40GB" in result.stdout
    bad = invoke("plan", "--nic", "NDR", "--gpus", "64")
    assert bad.exit_code == 2 and "--nic NDR swaps the NICs of a --cluster" in bad.stderr
    mixed = invoke("plan", "--cluster", "a100-hdr", "--nics-per-server", "4", "--gpus", "64")
    assert mixed.exit_code == 2 and "does not apply with --cluster" in mixed.stderr


def test_whatif_nic_swap_and_compute_label():
    from fabriclab.cli.main import app as main_app

    result = invoke("whatif", "--cluster", "a100-hdr", "--nic", "NDR", "--workers", "64", "--format", "plain",
                    target_app=main_app)
    assert result.exit_code == 0, result.output
    assert "a100-hdr+NDR" in result.stdout and "instead of" in result.stdout
    assert "compute: measured profile of V100" in result.stdout and "converted to A100" in result.stdout


def _spec(**kw):
    base = dict(profiles=(load_profile("resnet50"),), gpus=(128,), fabrics=("100gbe",),
                bisections=(Fraction(1),), prices=load_prices())
    base.update(kw)
    return PlanSpec(**base)
