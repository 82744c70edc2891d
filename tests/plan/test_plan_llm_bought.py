"""What an LLM plan's row buys and what its communication costs, as the tables say it (`plan/llm/report.py`),
and one warning per distinct PCIe cap over the options (`plan/llm/cluster.pcie_lines`)."""

from fabriclab.fabric.presets import cluster_preset
from fabriclab.plan.llm.cluster import pcie_cap, pcie_lines, vary_cluster
from fabriclab.plan.llm.cost import option_cost
from fabriclab.plan.llm.report import bought, communication_usd, short_money
from fabriclab.plan.prices import load_prices


def test_an_nvl72_option_buys_whole_racks_and_an_hgx_option_whole_servers():
    table = load_prices()
    nvl = option_cost(cluster_preset("gb200-nvl72"), 8192, table)
    assert (nvl["gpus_bought"], nvl["domains_bought"], bought(nvl)) == (9216, 128, "128 racks of 72")
    assert short_money(nvl["servers_usd"]) == "$320.0M" and short_money(nvl["network_usd"]) == "$63.4M"
    assert f"{nvl['network_share']:.1%}" == "16.5%"
    hgx = option_cost(cluster_preset("hgx-b200"), 64, table)
    assert (hgx["gpus_bought"], hgx["domains_bought"], bought(hgx)) == (64, 0, "8 servers of 8")
    assert bought({**nvl, "domains_bought": 1}) == "1 rack of 72"


def test_money_is_scaled_never_cut_and_communication_is_priced_by_its_share_of_the_step():
    assert [short_money(v) for v in (63_406_080, 1_234_500_000, 850_000, 9_500, 950)] == \
        ["$63.4M", "$1,234.5M", "$850.0k", "$9,500", "$950"]
    row = {"split_s": {"compute": 9.0, "dp": 0.5, "pp": 0.5}, "step_time_s": 10.0, "cluster_usd": 400e6}
    assert communication_usd(row) == 0.1 * 400e6


def test_a_pcie_cap_shared_by_several_options_is_one_line():
    h100 = cluster_preset("dgx-h100")
    fast = vary_cluster(h100, nic_rate_Bps=100e9)  # 800G behind PCIe Gen5 x16
    options = [(f"dgx-h100 {f} 800G", "dgx-h100", vary_cluster(fast, fabric=f)) for f in ("rail", "fat-tree")]
    options += [("hgx-b200 rail 800G", "hgx-b200", cluster_preset("hgx-b200")),
                ("dgx-h100 rail 400G", "dgx-h100", h100)]
    (line,) = pcie_lines(options)
    assert line.startswith("dgx-h100, hgx-b200 (3 options): each 800 Gb/s NIC runs at most 461 Gb/s")
    assert pcie_lines(options[:1]) == [pcie_cap(fast, "dgx-h100 rail 800G")]
    slower = vary_cluster(h100, nic_rate_Bps=200e9)  # 1.6T: another cap, another line
    assert len(pcie_lines([*options, ("dgx-h100 rail 1600G", "dgx-h100", slower)])) == 2
