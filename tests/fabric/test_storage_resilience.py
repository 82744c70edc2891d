"""The cluster's storage path and resilience: defaults with their sources, the cluster file's sections (left
out at the defaults, kept otherwise), and bad values refused by name."""

from dataclasses import replace

import pytest

from fabriclab.fabric.cluster import from_dict, to_dict
from fabriclab.fabric.presets import cluster_preset
from fabriclab.fabric.resilience import ResilienceSpec
from fabriclab.fabric.storage import StorageSpec


def test_the_default_storage_is_llama3s_path_with_its_source():
    s = StorageSpec()
    assert s.total_Bps == 2e12 and s.per_server_Bps == 100e9  # Tectonic 2 TB/s; a DGX H100's 2 x 400 Gb/s
    assert "Dubey" in s.source and "DGX H100" in s.source


def test_the_storage_rate_is_the_lesser_of_the_servers_paths_and_the_total():
    s = StorageSpec(per_server_Bps=50e9, total_Bps=1e12)
    assert s.rate_Bps(4) == 200e9  # four servers' paths
    assert s.rate_Bps(1000) == 1e12  # the file system's total


def test_a_cluster_file_leaves_the_defaults_out_and_keeps_what_differs():
    plain = cluster_preset("dgx-h100")
    data = to_dict(plain)
    assert "storage" not in data and "resilience" not in data  # reads as before checkpoints were modelled
    assert from_dict(data).storage == StorageSpec() and from_dict(data).resilience == ResilienceSpec()
    changed = replace(plain, storage=StorageSpec(total_Bps=5e12, source="ours"),
                      resilience=ResilienceSpec(dual_tor=True, spine_spare=0.125, spare_servers=16))
    data = to_dict(changed)
    assert data["storage"]["total_Bps"] == 5e12 and data["resilience"]["spare_servers"] == 16
    again = from_dict(data)
    assert again.storage == changed.storage and again.resilience == changed.resilience


@pytest.mark.parametrize("section,values,named", [
    ("storage", {"total_Bps": 0}, "storage.total_Bps"),
    ("storage", {"per_server_Bps": -1.0}, "storage.per_server_Bps"),
    ("resilience", {"dual_tor": "yes"}, "resilience.dual_tor"),
    ("resilience", {"spine_spare": 1.5}, "resilience.spine_spare"),
    ("resilience", {"spare_servers": -2}, "resilience.spare_servers"),
    ("resilience", {"spare_racks": 2}, "unknown key 'spare_racks'"),
])
def test_bad_values_are_refused_by_name(section, values, named):
    data = to_dict(cluster_preset("dgx-h100"))
    data[section] = values
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        from_dict(data, "c.json")
