"""`fabriclab plan` on the command line: table, notes, record, plot, one-line errors, and the same
point as `fabriclab whatif --cost simulated`."""

import csv
import io
import json

import pytest

from fabriclab.plan.search import V100_GAMMA_S_PER_BYTE
from fabriclab.workload.profile import load_profile
from plan_app import invoke

SMALL = ("plan", "--gpus", "64,128", "--fabrics", "25gbe,100gbe", "--bisection", "1,1/4")


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.output


def test_plain_table_recommendation_and_price_label():
    result = invoke(*SMALL, "--target", "0.9")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "network plan" in out and "illustrative prices" in out
    assert out.count("resnet50 at 64 GPUs: the cheapest option that reaches 0.90 is") == 1
    assert "resnet50 at 128 GPUs:" in out
    # 64 GPUs = 32 servers fit one 48-port 25GbE or 32-port 100GbE switch; 128 GPUs need 2 levels
    table_lines = [line for line in out.splitlines() if line.startswith("  ") and "GbE" in line]
    assert len(table_lines) == 6 and sum("2L" in line for line in table_lines) == 4
    assert all(len(line) <= 80 for line in table_lines)
    assert "6 options on 6 topologies" in out
    assert "compute: measured profile of V100" in out and "NCCL's choice" in out


def test_csv_on_stdout_notes_on_stderr_and_json_record(tmp_path):
    record_path = tmp_path / "plan.json"
    result = invoke(*SMALL, "--format", "csv", "--json", str(record_path))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 6 and {r["fabric"] for r in rows} == {"25GbE", "100GbE"}
    assert "cheapest option" in result.stderr
    record = json.loads(record_path.read_text())
    assert record["kind"] == "plan" and record["config"]["price_label"] == "illustrative"
    assert len(record["results"]["rows"]) == 6
    assert record["results"]["prices"]["fabrics"]["25GbE"]["nic"]["source"]
    assert record["results"]["recommendations"][0]["row"] is not None


def test_json_to_stdout():
    result = invoke(*SMALL, "--json", "-")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["kind"] == "plan" and record["results"]["stats"]["num_options"] == 6


def test_out_dir_gets_plot_and_rows(tmp_path):
    result = invoke(*SMALL, "--model", "resnet50,vgg16", "--out", str(tmp_path / "plan"))
    assert result.exit_code == 0, result.output
    for name in ("plan-resnet50.png", "plan-vgg16.png", "plan.csv", "plan.json"):
        assert (tmp_path / "plan" / name).stat().st_size > 0, name
    assert (tmp_path / "plan" / "plan-vgg16.png").read_bytes()[:4] == b"\x89PNG"


def test_profile_file_and_user_prices(tmp_path):
    profile = tmp_path / "mine.json"
    profile.write_text(load_profile("resnet50").to_json())
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"label": "our quotes", "fabrics": {"100GbE": {
        "nic": 1, "switch_port": 2, "host_cable": 3, "switch_cable": 4}}}))
    result = invoke("plan", "--model", str(profile), "--gpus", "64", "--fabrics", "100gbe", "--bisection", "1",
                    "--prices", str(prices), "--format", "json")
    assert result.exit_code == 0, result.output
    (table,) = [json.loads(line) for line in result.stdout.splitlines()]
    (row,) = table["rows"]
    # 32 servers fit one 32-port 100GbE switch: 32 NICs and host cables, one whole switch of 32 ports.
    assert row["network $"] == f"{32 * 1 + 32 * 2 + 32 * 3:,}"
    assert "share" not in row
    assert "our quotes prices" in result.stderr and "illustrative" not in result.stderr


@pytest.mark.parametrize("args, fragment", [
    (("--fabrics", "25gbe,warp9"), "unknown link preset 'warp9'"),
    (("--bisection", "1,1/32"), "outside 1 .. 1/16"),
    (("--gpus", "256", "--fabrics", "100gbe", "--bisection", "1/3"), "no option could be built"),
    (("--gpus", "63"), "multiples of --gpus-per-server"),
    (("--target", "1.2"), "(0, 1]"),
    (("--target", "nan"), "NaN"),
    (("--budget", "lots"), "--budget 'lots' is not a number"),
    (("--model", "alexnet9"), "neither a built-in"),
    (("--fusion", "magic"), "unknown fusion policy"),
])
def test_bad_input_is_one_error_line(args, fragment):
    assert_one_line_error(invoke("plan", "--gpus", "64", *args), fragment)


@pytest.mark.parametrize("content, fragment", [
    ("", "is empty"),
    ('{"fabrics": {"25GbE": {"nic": -1, "switch_port": 1, "host_cable": 1, "switch_cable": 1}}}', ">= 0"),
    ('{"fabrics": {"25GbE": {"nic": NaN, "switch_port": 1, "host_cable": 1, "switch_cable": 1}}}', "finite"),
])
def test_bad_price_file_is_one_error_line(tmp_path, content, fragment):
    path = tmp_path / "p.json"
    path.write_text(content)
    assert_one_line_error(invoke("plan", "--gpus", "64", "--fabrics", "25gbe", "--prices", str(path)), fragment)


def test_unwritable_out_is_refused_before_the_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(invoke(*SMALL, "--out", str(blocker)), "that is a file")


def test_plan_and_whatif_cli_agree_on_the_same_point(tmp_path):
    """One GPU per server and a plain fat tree, which `fabriclab whatif --cost simulated` also builds."""
    from fabriclab.cli.main import app as main_app

    plan_result = invoke("plan", "--gpus", "64", "--gpus-per-server", "1", "--fabrics", "25gbe",
                         "--bisection", "1/4", "--algo", "ring", "--hosts-per-leaf", "16", "--json", "-")
    assert plan_result.exit_code == 0, plan_result.output
    (row,) = json.loads(plan_result.stdout)["results"]["rows"]
    path = tmp_path / "whatif.json"
    whatif = invoke("whatif", "--profile", "resnet50", "--workers", "64", "--bandwidth", "25Gbps",
                    "--latency", "0.3us", "--cost", "simulated", "--topology", "fat-tree",
                    "--hosts-per-leaf", "16", "--bisection", "1/4", "--gamma", repr(V100_GAMMA_S_PER_BYTE),
                    "--json", str(path), target_app=main_app)
    assert whatif.exit_code == 0, whatif.output
    (point,) = json.loads(path.read_text())["results"]
    assert row["scaling_factor"] == pytest.approx(point["scaling_factor"], rel=1e-6)
    assert row["iteration_s"] == pytest.approx(point["iteration_s"], rel=1e-6)
