"""`plan --model <LLM>` on the command line: what the network costs in each row, the runner-up, ties and the
PCIe cap said, --tp/--pp/--ep/--zero and --efficiency parsed, everything in --json."""

import json

from plan_app import invoke

SMALL = ("plan", "--model", "llama3-8b", "--gpus", "64", "--clusters", "dgx-h100", "--gbs", "256", "--seq", "4096")


def test_the_network_tables_ties_and_pcie_cap(tmp_path):
    result = invoke(*SMALL, "--nic-rates", "400Gbps,800Gbps", "--json", str(tmp_path / "p.json"))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "what communication costs" in out and "the runner-up configuration of each row" in out
    assert "dgx-h100 rail 800G: each 800 Gb/s NIC runs at most 461 Gb/s" in " ".join(out.split())
    results = json.loads((tmp_path / "p.json").read_text())["results"]
    assert results["pcie"] and all("runner_up" in r and "split_s" in r for r in results["rows"])
    assert all(line in " ".join(out.split()) for line in results["ties"])
    header = next(line for line in out.splitlines() if line.startswith("# #  compute"))
    assert "comm" in header and len(header) <= 80


def test_bounds_and_efficiency(tmp_path):
    result = invoke(*SMALL, "--tp", "2", "--pp", "1-2", "--zero", "1", "--efficiency", "40%", "--json",
                    str(tmp_path / "p.json"))
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "p.json").read_text())
    assert record["config"]["bound_tp"] == [2] and record["config"]["bound_pp"] == [1, 2]
    assert record["config"]["efficiency"] == 0.4
    for c in record["results"]["configs"]:
        assert c["tp"] == 2 and c["pp"] in (1, 2) and c["zero"] == 1
    bad = invoke(*SMALL, "--tp", "3")
    assert bad.exit_code == 2 and "has --tp 3" in bad.stderr
    cnn = invoke("plan", "--model", "resnet50", "--tp", "4")
    assert cnn.exit_code == 2 and "--tp applies to an LLM plan" in cnn.stderr
