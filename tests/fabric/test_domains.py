"""NVLink domains that span trays (`fabric/domains.py`): a 72-GPU domain loads from a hand-written file, its
errors name the user's numbers, the library sees the domain as one node from NCCL 2.20 (and trays before),
placement fills domains and says so, and collectives inside a domain run at NVLink speed."""

import json
from dataclasses import replace

import pytest

from fabriclab.fabric.cluster import from_dict, load_cluster, to_dict
from fabriclab.fabric.domains import (domain_gpus_used, domain_view, placement_note, power_of_two_use,
                                      with_domain_gpus)
from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.features import feature_lines, features_of
from fabriclab.nccl.predict import collective_times


def _nvl72_file(tmp_path, **server):
    data = to_dict(cluster_preset("gb200-nvl72"))
    data["server"].update(server)
    path = tmp_path / "nvl72.json"
    path.write_text(json.dumps(data))
    return path


def test_a_hand_written_72_gpu_domain_loads_and_round_trips(tmp_path):
    c = load_cluster(_nvl72_file(tmp_path))
    assert (c.server.gpus_per_server, c.server.gpus_per_domain) == (4, 72)
    assert to_dict(from_dict(to_dict(c))) == to_dict(c)
    # a server that is its own domain writes no domain key: older files and their readers are unchanged
    assert "gpus_per_domain" not in to_dict(cluster_preset("dgx-h100"))["server"]


@pytest.mark.parametrize("server, words", [
    ({"gpus_per_domain": 70}, ["gpus_per_domain 70", "gpus_per_server 4", "68, 72"]),
    ({"gpus_per_domain": 2}, ["gpus_per_domain 2", "gpus_per_server 4"]),
    ({"gpus_per_domain": 72, "intra": "pcie"}, ["gpus_per_domain 72", "'pcie'"]),
    ({"domain_gpus_used": 66}, ["domain_gpus_used is 66", "trays of 4"]),
])
def test_bad_domains_name_the_numbers_given_and_what_to_change(tmp_path, server, words):
    with pytest.raises(ValueError) as err:
        load_cluster(_nvl72_file(tmp_path, **server))
    for word in words:
        assert word in str(err.value)


def test_the_domain_view_is_one_node_with_every_tray_s_nics_and_is_idempotent():
    c = cluster_preset("gb200-nvl72")
    view = domain_view(c, 144)
    assert (view.server.gpus_per_server, view.server.nics_per_server) == (72, 72)
    assert domain_view(view, 144) == view
    # a job that is no multiple of 72: the most whole trays per domain that divide it (4,096 = 64 x 64)
    assert domain_view(c, 4096).server.gpus_per_server == 64
    assert "64 of each NVLink domain's 72 (16 of 18 trays of 4; 2 trays spare) in 64 domains" in \
        placement_note(c, 4096)
    assert placement_note(cluster_preset("hgx-b200"), 4096) == ""


def test_before_nccl_2_20_the_trays_are_the_nodes():
    c = cluster_preset("gb200-nvl72")
    old = replace(c, library=replace(c.library, nccl_version="2.19.3"))
    assert domain_view(old, 144).server.gpus_per_server == 4
    assert "predates multi-node NVLink" in placement_note(old, 144)
    assert "mnnvl (2.20)" in feature_lines(old)[-1]
    # and it costs: a 1 GB all-reduce over 8 GPUs of two trays goes over the NICs, not the NVLink switches
    new_t, _ = collective_times(c, 8, [1 << 30])
    old_t, _ = collective_times(old, 8, [1 << 30])
    assert old_t[0] > 3 * new_t[0]


def test_placement_errors_name_the_numbers():
    c = cluster_preset("gb200-nvl72")
    with pytest.raises(ValueError, match=r"--gpus 4602 .* trays of 4 GPUs"):
        domain_gpus_used(c, 4602)
    with pytest.raises(ValueError, match=r"--domain-gpus 66: give whole trays of 4"):
        with_domain_gpus(c, 66)
    with pytest.raises(ValueError, match=r"--domain-gpus 8: cluster hgx-b200's NVLink domain is its server"):
        with_domain_gpus(cluster_preset("hgx-b200"), 8)
    used = with_domain_gpus(c, 64)
    assert domain_gpus_used(used, 4608) == 64 and power_of_two_use(c) == 64
    with pytest.raises(ValueError, match=r"4600 is not a multiple of 64"):
        domain_gpus_used(used, 4600)


def test_an_all_reduce_inside_one_nvl72_beats_nine_hgx_servers_and_runs_nvls():
    """72 GPUs in one NVLink domain against 72 GPUs as 9 HGX B200 servers: the same NVLink 5 per GPU, but the
    HGX job crosses its NICs (behind PCIe 5.0) while the rack never leaves NVLink."""
    rack, picks = collective_times(cluster_preset("gb200-nvl72"), 72, [1 << 30])
    servers, _ = collective_times(cluster_preset("hgx-b200"), 72, [1 << 30])
    assert picks[0].startswith("nvls")
    assert servers[0] > 2 * rack[0]
    busbw = (1 << 30) / rack[0] * 2 * 71 / 72
    assert 450e9 < busbw < 2 * 900e9  # NVLS reduces in the switch: busbw may pass the 900 GB/s link


def test_features_carry_the_release_that_introduced_each():
    names = {f.name for f in features_of("2.18.3")}
    assert {"nvls", "nvls_tree"} <= names and not {"mnnvl", "pat"} & names
    assert {"mnnvl", "pat"} <= {f.name for f in features_of("2.27.7")}
    lines = feature_lines(cluster_preset("gb300-nvl72"))
    assert lines[0] == "NCCL 2.27.7: a node is an NVLink domain of 72"
    assert "NVLS" in lines[1] and "PAT" in lines[2]
    assert "NVLS" not in feature_lines(cluster_preset("dgx-a100"))[1]  # no NVLink SHARP before Hopper
