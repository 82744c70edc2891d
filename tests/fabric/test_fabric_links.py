"""Link presets, plain links and their errors."""

import pytest

from fabriclab.fabric.links import LINK_PRESET_NAMES, link_preset, parse_link, plain_link, resolve_link


def test_every_preset_has_a_positive_rate_a_latency_and_a_source():
    for name in LINK_PRESET_NAMES:
        link = link_preset(name)
        assert link.bandwidth_Bps > 0 and link.latency_s > 0 and 0 < link.efficiency <= 1
        assert link.description


@pytest.mark.parametrize("name, gbit", [("1GbE", 1), ("10GbE", 10), ("25GbE", 25), ("40GbE", 40),
                                        ("100GbE", 100), ("200GbE", 200), ("400GbE", 400), ("OPA100", 100),
                                        ("EDR", 100), ("HDR", 200), ("NDR", 400), ("XDR", 800),
                                        ("800GbE", 800), ("800g-xdr", 800)])
def test_network_presets_carry_their_nominal_rate(name, gbit):
    assert link_preset(name).bandwidth_Bps == pytest.approx(gbit * 1e9 / 8)


def test_on_board_presets():
    assert link_preset("PCIe3x16").bandwidth_Bps == pytest.approx(15.754e9, rel=1e-3)
    assert link_preset("pcie4-x16").bandwidth_Bps == pytest.approx(2 * link_preset("PCIe3x16").bandwidth_Bps)
    assert link_preset("PCIe5x16").bandwidth_Bps == pytest.approx(63.015e9, rel=1e-3)
    assert [link_preset(f"NVLink-{g}").bandwidth_Bps for g in ("V100", "A100", "H100", "B200")] == \
        [150e9, 300e9, 450e9, 900e9]
    assert link_preset("upi").name == "UPI"


def test_efficiency_is_off_by_default():
    eth = link_preset("100GbE")
    assert eth.effective_bandwidth() == eth.bandwidth_Bps
    assert eth.effective_bandwidth(use_efficiency=True) == pytest.approx(0.94 * 12.5e9, rel=2e-3)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown link preset 'FDR'.*EDR, HDR, NDR"):
        link_preset("FDR")


def test_plain_links_from_bandwidth_and_latency():
    link = parse_link("4GB/s@0.2us")
    assert (link.bandwidth_Bps, link.latency_s) == (4e9, pytest.approx(0.2e-6))
    assert link.name == "4GB/s@0.2us"
    assert parse_link("25Gbps").bandwidth_Bps == 3.125e9
    assert plain_link(1e9, 1e-6).latency_s == 1e-6
    assert parse_link("EDR@1us").latency_s == pytest.approx(1e-6)
    over = resolve_link("EDR", link_Bps=4e9, latency_s=1e-6)
    assert (over.bandwidth_Bps, over.latency_s) == (4e9, pytest.approx(1e-6))


@pytest.mark.parametrize("bad", ["0GB/s", "4 apples"])
def test_bad_links_say_what_to_write(bad):
    with pytest.raises(ValueError, match="4GB/s@0.2us|greater than zero"):
        parse_link(bad)


def test_zero_bandwidth_is_refused():
    with pytest.raises(ValueError, match="bandwidth greater than zero"):
        plain_link(0.0, 0.0)
    with pytest.raises(ValueError, match="greater than zero"):
        resolve_link("EDR", link_Bps=0)
