"""The cluster file: one JSON, schema-versioned, every bad value a ValueError naming the file and key."""

import json

import pytest

from fabriclab.nccl.library import resolved, step_latencies

from fabriclab.fabric.cluster import (
    a100_hdr_prior,
    dumps,
    load_cluster,
    prior_cluster,
    save_cluster,
)
from fabriclab.fabric.links import link_preset


def test_round_trip(tmp_path):
    model = a100_hdr_prior()
    save_cluster(model, tmp_path / "c.json")
    assert load_cluster(tmp_path / "c.json") == model
    data = json.loads(dumps(model))
    assert data["schema"] == "fabriclab.cluster/1" and data["server"]["nics_per_server"] == 8
    assert data["library"]["latencies"] is None  # a prior: its NCCL version's own constants
    assert step_latencies(model)["ring"]["Simple"].net_step_s == pytest.approx(9.6e-6)  # v2.9.9 hwLat NET


def test_prior_from_data_sheets():
    model = prior_cluster(gpus_per_server=2, gpu_name="Tesla V100-PCIE-32GB", intra="pcie",
                          nic=link_preset("25GbE"), nics_per_server=1)
    assert model.server.nic_bandwidth_Bps == 25e9 / 8 and model.server.intra == "pcie"
    assert model.library.selection_busbw_cap_Bps is None  # NCCL's 235 GB/s cap is for sm80 only
    assert a100_hdr_prior().library.selection_busbw_cap_Bps == 235e9


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(schema="fabriclab.cluster/0"), ["schema"]),
    (lambda d: d.pop("server"), ["'server'"]),
    (lambda d: d["server"].update(nic_efficiency=1.5), ["server.nic_efficiency", "(0, 1]"]),
    (lambda d: d["server"].update(gpus_per_server=0), ["server.gpus_per_server", ">= 1"]),
    (lambda d: d["server"].update(nics_per_server=3), ["3 NICs", "8 GPUs"]),
    (lambda d: d["server"].update(colour="red"), ["server", "unknown key 'colour'"]),
    (lambda d: d["network"].update(fabric="torus"), ["network.fabric", "rail, fat-tree"]),
    (lambda d: d["library"]["latencies"]["ring"]["LL"].update(base_s=-1), ["latencies.ring.LL.base_s", ">= 0"]),
    (lambda d: d["library"]["latencies"]["ring"].pop("LL128"), ["latencies.ring", "'LL128'"]),
    (lambda d: d["library"].update(selection="magic"), ["library.selection"]),
    (lambda d: d["library"]["protocols"]["LL"].update(link_factor=0), ["protocols.LL.link_factor"]),
])
def test_bad_content_names_file_and_key(tmp_path, edit, words):
    data = json.loads(dumps(resolved(a100_hdr_prior())))  # latencies written out, as a calibrated file has them
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        load_cluster(path)
    assert str(path) in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


def test_not_json_and_missing(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"x\.json is not JSON \(line 1"):
        load_cluster(tmp_path / "x.json")
    with pytest.raises(ValueError, match="cannot read cluster file"):
        load_cluster(tmp_path / "missing.json")
