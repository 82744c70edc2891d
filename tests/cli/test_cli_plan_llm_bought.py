"""`plan --model <LLM>` on the command line: what each option buys (GPUs in whole servers or racks, the servers'
and the network's dollars, the network's share, its switch tiers) and what its exposed communication costs in
dollars, in tables of 80 columns; one line per distinct warning; a GPU count no configuration divides refused
with the nearest sizes that do."""

import json

from plan_app import invoke

from fabriclab.plan.llm.report import communication_usd, short_money


def _section(out: str, title: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {title}"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("  "):
            break
        rows.append(line)
    return rows


def test_each_option_says_what_it_buys_and_what_communication_costs_in_dollars(tmp_path):
    result = invoke("plan", "--model", "llama3-8b", "--gpus", "64", "--clusters", "hgx-b200,gb200-nvl72", "--gbs",
                    "256", "--seq", "4096", "--fabrics", "rail,fat-tree", "--json", str(tmp_path / "p.json"))
    assert result.exit_code == 0, result.output
    out = result.stdout
    rows = json.loads((tmp_path / "p.json").read_text())["results"]["rows"]
    bought = _section(out, "what each option buys")
    assert len(bought) == len(rows) == 4
    for line, r in zip(bought, rows):
        cells = line.split()
        assert f"{r['gpus_bought']:,}" in cells and short_money(r["network_usd"]) in cells
        assert short_money(r["servers_usd"]) in cells and f"{r['network_share']:.1%}" in cells
        assert ("1 rack of 72" if r["cluster"] == "gb200-nvl72" else "8 servers of 8") in line
        assert r["gpus_bought"] == (72 if r["cluster"] == "gb200-nvl72" else 64)
    comm = _section(out, "what communication costs")
    assert all(short_money(communication_usd(r)) in line.split() for line, r in zip(comm, rows))
    tables = [line for line in out.splitlines() if line.startswith("# ") or line[:2] == "  " and line[2:3].isdigit()]
    assert len(tables) > 30 and all(len(line) <= 80 for line in tables), [t for t in tables if len(t) > 80]
    # the 800G NICs of both hgx-b200 options are capped by the same PCIe path: said once, naming them
    capped = [line for line in out.splitlines() if "runs at most 461 Gb/s" in line]
    assert len(capped) == 1 and capped[0].startswith("hgx-b200 (2 options): each 800 Gb/s NIC")


def test_a_gpu_count_nothing_divides_is_refused_with_the_nearest_sizes():
    result = invoke("plan", "--model", "llama3-405b", "--gpus", "8000", "--clusters", "hgx-b200,gb200-nvl72")
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: llama3-405b: no parallel configuration divides 8,000 GPUs with a global batch of "
                           "2,048; nearest sizes that divide: on hgx-b200 7,936 or 8,192 GPUs")
    assert "on gb200-nvl72 7,936 or 8,192 GPUs" in line and "(whole racks of 72: 7,992 with --gbs" in line
    assert ", 8,064 with --gbs 2,044 or 2,052)" in line
