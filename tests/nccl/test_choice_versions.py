"""NCCL's tuning model per release: version parsing, the tables against NCCL's source, the choices they make."""

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fabriclab.fabric.cluster import a100_hdr_prior, prior_cluster
from fabriclab.fabric.links import link_preset
from fabriclab.nccl.choice import nccl_choices, nccl_estimates
from fabriclab.nccl.versions import (ALGORITHMS, ARCHS, LEGACY_TABLE, NEWEST_NCCL_VERSION, SUPPORTED_VERSIONS,
                                     TABLES, channels_used, compute_capability, newer_than_modelled,
                                     parse_nccl_version, table_of, tree_chunk_bytes, tree_depth, tuning_for)

NCCL_GIT = Path("/work/.mirror/NVIDIA+nccl/repo")  # a bare clone of github.com/NVIDIA/nccl, where there is one


def at(cluster, version):
    return replace(cluster, library=replace(cluster.library, nccl_version=version))


def h100(gpus_per_server=8, nics=None):
    return prior_cluster(gpus_per_server=gpus_per_server, gpu_name="NVIDIA H100 80GB HBM3", nic=link_preset("NDR"),
                         nics_per_server=nics)


@pytest.mark.parametrize("text, version", [
    ("2.18.3", "2.18.3"), ("2.18.3+cuda12.2", "2.18.3"), ("NCCL version 2.18.3+cuda12.2", "2.18.3"),
    ("nccl-library=21803", "2.18.3"), ("nccl-headers=21903", "2.19.3"), ("v2.30.7-1", "2.30.7"),
    (" 2.9.9 ", "2.9.9"), ("22703", "2.27.3"), ("23007", "2.30.7")])
def test_versions_parse(text, version):
    assert parse_nccl_version(text) == version


@pytest.mark.parametrize("text", ["", "2.18", "NCCL 2.x", "2.18.3.1", "nccl-library=2403", "20800"])
def test_bad_versions_say_what_is_accepted(text):
    with pytest.raises(ValueError, match="2.18.3|2.9.0"):
        parse_nccl_version(text)


def test_tuning_for_picks_the_newest_table_at_or_before():
    assert tuning_for("2.18.5").release == "2.18.3" and tuning_for("2.18.1").release == "2.18.1"
    assert tuning_for("2.11.4").release == "2.10.3" and tuning_for("2.9.6").release == "2.9.9"
    assert tuning_for("nccl-library=22005").release == "2.20.5"
    with pytest.raises(ValueError, match=r"use 2\.9 or newer.*nccl24\.py"):
        tuning_for("2.8.4")
    assert tuning_for("2.31.2").release == NEWEST_NCCL_VERSION == SUPPORTED_VERSIONS[-1] == "2.30.7"
    assert newer_than_modelled("2.31.2") and not newer_than_modelled("2.30.7")
    assert [t.release for t in TABLES] == list(SUPPORTED_VERSIONS)
    assert all(tuning_for(t.since) is t for t in TABLES)
    # a cluster saying 2.7.8 (logs without a version, files from before versions were recorded) keeps
    # fabriclab's earlier model, NCCL 2.7.8's constants; 2.9.x runs the real 2.9.9 table
    assert table_of("2.7.8") is LEGACY_TABLE and table_of("2.9.9") is tuning_for("2.9.8") is TABLES[0]
    assert table_of("2.18.3") is tuning_for("2.18.3")


def test_constants_as_the_tags_write_them():
    t = LEGACY_TABLE  # v2.7.8-1 src/graph/tuning.cc: what fabriclab modelled as "NCCL 2.9"
    assert t.hw_lat_us["nvlink"]["tree"] == (.52, 1.2, 28) and t.hw_lat_us["net"]["tree"] == (5.0, 8.5, 50)
    assert t.ll128_max_bw_per_collective["allreduce"] == 16.7 and len(t.tree_correction["LL"]) == 22
    t = tuning_for("2.9.9")  # v2.9.9-1 src/graph/tuning.cc
    assert t.hw_lat_us["net"]["tree"] == (5.0, 8.5, 28) and t.hw_lat_us["nvlink"]["tree"] == (.52, 1.25, 28)
    assert t.ll128_max_bw_per_collective["allreduce"] == 16.9 and t.tree_max_bw["ampere"] == (24.0, 22.5, 16.0)
    assert t.ll_max_bw["ampere"] == (87.7, 22.5, 19.0) and t.busbw_cap == {"ampere": 235.0}
    assert len(t.tree_correction["LL128"]) == 23 and t.tree_correction["LL128"][21] == .92
    assert t.ring_inter_steps_offset == 1 and t.plateau_factors == ((0, 1.9),) and t.ll_intra_factor == 1.8
    t = tuning_for("2.10.3")  # v2.10.3-1
    assert t.hw_lat_us["nvlink"]["collnet_direct"][2] == 8.0 and t.tree_max_bw["ampere"] == (24.0, 23.6, 17.8)
    assert t.ring_ll128_max_bw["ampere"] == (20.0,) * 3 and t.tree_ll128_factor[1] == 120 / 128
    assert tuning_for("2.12.12").hw_lat_us["net"]["ring"] == (2.7, 4.0, 28)  # v2.12.12-1
    assert tuning_for("2.12.12").ring_inter_steps_offset == 0  # nInterSteps = 2 * nNodes
    t = tuning_for("2.14.3")  # v2.14.3-1
    assert t.hw_lat_us["net"]["ring"] == (2.7, 4.0, 9.6) and t.collnet_chain_factor == .75 and 90 in t.ll128_ccs
    t = tuning_for("2.15.5")  # v2.15.5-1: compCapIndex by exact match
    assert t.ll_max_bw["hopper"] == (87.7, 22.5, 19.0) and t.arch(90) == "hopper" and t.arch(86) == "volta"
    t = tuning_for("2.17.1")  # v2.17.1-1
    assert t.base_lat_us["nvls"] == (0, 0, 40.0) and t.ring_ll128_max_bw["hopper"] == (36.7,) * 3
    assert t.tree_max_bw["hopper"] == (38.7, 41.4, 33.0) and t.busbw_cap["hopper"] == 370.0 and t.arch(86) == "ampere"
    t = tuning_for("2.18.1")  # v2.18.1-1
    assert t.base_lat_us["tree"] == (6.8, 14.0, 0) and t.base_lat_us["ring"] == (6.6, 14.0, 8.4)
    assert t.hw_lat_us["net"]["nvls"][2] == 18 and t.hw_lat_us["net"]["nvls_tree"][2] == 19 and not t.busbw_cap
    t = tuning_for("2.18.3")  # v2.18.3-1
    assert [t.hw_lat_us[hw]["tree"][2] for hw in ("nvlink", "pci", "net")] == [4, 6, 14]
    assert t.tree_ll128_max_bw["hopper"] == (36.7, 36.7, 29.0) and t.tree_max_bw["hopper"][2] == 36.0
    t = tuning_for("2.19.4")  # v2.19.4-1
    assert t.hw_lat_us["net"]["collnet_direct"][2] == 31 and t.hw_lat_us["nvlink"]["nvls"][2] == 23
    t = tuning_for("2.21.5")  # v2.21.5-1
    assert t.ll_max_bw["hopper"] == (141.0, 45.0, 35.0) and t.ring_ll_factor == .5
    t = tuning_for("2.23.4")  # v2.23.4-1
    assert t.base_lat_us["tree"][2] == 8.4 and t.hw_lat_us["net"]["tree"][2] == 14 and t.pat_factor == .85
    assert tuning_for("2.24.3").pat_factor == .75  # v2.24.3-1
    assert tuning_for("2.25.1").tree_max_bw["blackwell"] == (2 * 38.7, 2 * 41.4, 2 * 36.0)  # v2.25.1-1
    t = tuning_for("2.28.3")  # v2.28.3-1
    assert t.nvls_efficiency["hopper"] == .85 and t.nvls_efficiency["blackwell"] == .74
    assert t.nvls_tree_max_bw["hopper"] == (0.0, 57.7, 45.5) and t.tree_max_bw["blackwell"] == (70.0, 42.8, 24.0)
    assert tuning_for("2.28.9").hw_lat_us["net"]["nvls_tree"][2] == 20.9  # v2.28.9-1
    t = tuning_for("2.29.2")  # v2.29.2-1
    assert len(t.tree_correction["Simple"]) == 24 and t.ring_ll128_max_bw["blackwell"] == (34.5, 34.6, 34.5)
    assert tuning_for("2.29.7").ring_ll128_max_bw["blackwell"] == (40.0,) * 3  # v2.29.7-1
    assert tuning_for("2.30.7").nvls_tree_max_bw["blackwell"] == (0.0, 96.0, 80.0)  # v2.30.3-1 .. v2.30.7-1
    for t in TABLES:  # device.h / devcomm.h, comm.h, init.cc: unchanged from 2.9 to 2.30
        assert t.nccl_steps == 8 and t.buff_sizes == {"LL": 524288, "LL128": 4915200, "Simple": 4194304}
        assert t.thread_threshold == {"LL": 8, "LL128": 8, "Simple": 64}


def _numbers(text: str) -> list[float]:
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    return [float(a) * (float(b) if b else 1.0)
            for a, b in re.findall(r"(?<![A-Za-z_0-9.])(\d*\.?\d+)f?(?:\s*\*\s*(\d*\.?\d+))?", text)]


def _initializer(source: str, name: str) -> list[float] | None:
    m = re.search(rf"\b{name}\s*(?:\[[^\]]*\]\s*)*=\s*(\{{.*?\}});", source, flags=re.S)
    return _numbers(m.group(1)) if m else None


def _tuner_defaults(source: str) -> list[float] | None:
    m = re.search(r"ncclTunerConstantsDefaults\s*=\s*\{(.*?)\n\};", source, flags=re.S)
    return _numbers(m.group(1)) if m else None


@pytest.mark.skipif(not NCCL_GIT.is_dir(), reason="no clone of github.com/NVIDIA/nccl on this machine")
@pytest.mark.parametrize("table", (LEGACY_TABLE, *TABLES), ids=lambda t: t.release)
def test_tables_equal_the_source_of_their_tag(table):
    source = subprocess.run(["git", "-C", str(NCCL_GIT), "show", f"v{table.release}-1:src/graph/tuning.cc"],
                            capture_output=True, text=True, check=True).stdout
    defaults = _tuner_defaults(source)
    if defaults is None:
        base, hw = _initializer(source, "baseLat"), _initializer(source, "hwLat")
    else:  # 2.28+: one struct, in the order of ncclTunerConstants_t
        rows = len(ALGORITHMS)
        base, hw, rest = defaults[:3 * rows], defaults[3 * rows:12 * rows], defaults[12 * rows:]
        named = dict(zip(("llMaxBws", "perChMaxRingLL128Bws", "perChMaxTreeLL128Bws", "perChMaxTreeBws",
                          "perChMaxNVLSTreeBws"), (rest[i:i + 12] for i in range(0, 60, 12))))
    rows = len(base) // 3
    algos = ALGORITHMS[:rows]
    assert [table.base_lat_us[a][p] for a in algos for p in range(3)] == pytest.approx(base)
    assert [table.hw_lat_us[h][a][p] for h in ("nvlink", "pci", "net") for a in algos for p in range(3)] \
        == pytest.approx(hw)
    archs = ARCHS[:len(table.tree_max_bw)]

    def rows_of(mapping):
        return [x for a in archs for x in mapping[a]]
    for name, mapping in (("llMaxBws", table.ll_max_bw), ("perChMaxTreeBws", table.tree_max_bw),
                          ("perChMaxRingLL128Bws", table.ring_ll128_max_bw),
                          ("perChMaxTreeLL128Bws", table.tree_ll128_max_bw),
                          ("perChMaxNVLSTreeBws", table.nvls_tree_max_bw)):
        numbers = named.get(name) if defaults is not None else _initializer(source, name)
        if numbers is not None:
            assert rows_of(mapping) == pytest.approx(numbers), name
    per_channel = _initializer(source, "ll128MaxBwPerCh") if defaults is None else None
    if per_channel is not None and table.ll128_max_bw_per_collective:  # 2.9: per collective
        order = ("broadcast", "reduce", "allgather", "reduce_scatter", "allreduce")
        assert [table.ll128_max_bw_per_collective[c] for c in order] == per_channel
    elif per_channel is not None and "perChMaxRingLL128Bws" not in source:  # 2.10-2.18.1: one per GPU row
        assert [table.ring_ll128_max_bw[a][0] for a in archs][-len(per_channel):] == per_channel
    corr = re.search(r"treeCorrectionFactor\[NCCL_NUM_PROTOCOLS\]\[(\d+)\]", source)
    assert corr and int(corr.group(1)) == len(table.tree_correction["LL"])
    assert [x for p in ("LL", "LL128", "Simple") for x in table.tree_correction[p]] == \
        pytest.approx(_initializer(source, "treeCorrectionFactor"))


def test_nccl_29_choices_stay_as_they_were():
    # the choices fabriclab made before versions were recorded (NCCL 2.7.8: logs without a version)
    model = a100_hdr_prior()
    assert model.library.nccl_version == "2.7.8"
    sizes = [1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 30]
    r, t = "ring", "tree"
    assert nccl_choices(model, 8, sizes) == [(r, "LL")] * 3 + [(r, "LL128"), (r, "Simple"), (r, "Simple")]
    assert nccl_choices(model, 16, sizes) == [(t, "LL")] + [(r, "LL")] * 2 + [(r, "LL128")] + [(r, "Simple")] * 2
    assert nccl_choices(model, 128, sizes) == [(t, "LL")] * 2 + [(t, "LL128")] * 2 + [(r, "LL128")] * 2
    assert nccl_choices(model, 128, sizes, "allgather") == [(r, "LL")] * 3 + [(r, "LL128")] * 2 + [(r, "Simple")]
    assert nccl_choices(model, 16, sizes, "broadcast") == [(r, "LL")] * 3 + [(r, "LL128")] * 3
    est = nccl_estimates(model, 128, 16, [1 << 10, 1 << 30])
    assert list(est) == [(t, "LL"), (t, "LL128"), (t, "Simple"), (r, "LL"), (r, "LL128"), (r, "Simple")]
    assert est[(t, "LL")] == pytest.approx([57.612088888888884, 102062.97727999999], rel=1e-12)
    assert est[(r, "Simple")] == pytest.approx([1058.01016, 12663.73216], rel=1e-12)


def test_newer_constants_move_the_choice():
    model = a100_hdr_prior()
    size = [256 << 20]
    # 2.9.9 (fabriclab's model so far) caps a tree at 80 GB/s beyond 2 servers; from 2.10.3 the ceiling is
    # 16 channels x 17.8 GB/s (perChMaxTreeBws, Ampere, N4) and 256 MiB goes to the tree
    assert nccl_choices(model, 128, size) == [("ring", "LL128")]
    assert nccl_choices(at(model, "2.10.3"), 128, size) == [("tree", "LL128")]
    # 2.12.7 put ring NET Simple at 28 us over 2 x nNodes network steps: ring LL128 takes 2 GiB from Simple
    assert nccl_choices(at(model, "2.10.3"), 128, [2 << 30]) == [("ring", "Simple")]
    assert nccl_choices(at(model, "2.12.12"), 128, [2 << 30]) == [("ring", "LL128")]
    assert nccl_choices(at(model, "2.14.3"), 128, [2 << 30]) == [("ring", "Simple")]  # 9.6 us again


def test_a_ring_ll_estimate_follows_the_formula():
    model = at(a100_hdr_prior(), "2.18.3")  # 16 GPUs on 2 servers, Intel hosts
    est = nccl_estimates(model, 16, 2, [8.0, 1 << 20])[("ring", "LL")]
    # baseLat 6.6 + (30 - 2 x 2 network steps) x max(NVLink LL 0.6, net overhead 1.0) + 4 x NET LL 2.7 us
    latency = 6.6 + 26 * 1.0 + 4 * 2.7
    speed = model.server.intra_bandwidth_Bps / 1e9  # up to 2 servers: the intra-server graph bandwidth
    algbw = min(39.0, speed / 4) * 16 / 30  # llMaxBws[Intel][N2] = 39.0, busBw x 1/4, x nRanks / nsteps
    assert est == pytest.approx([latency + 8 / (1000 * algbw), latency + (1 << 20) / (1000 * algbw)])


def test_nvls_needs_nvlink_sharp_and_its_release():
    sizes = [1 << 30]
    assert not any(a == "nvls" for a, _ in nccl_estimates(at(h100(), "2.15.5"), 8, 1, sizes))
    for version in ("2.17.1", "2.18.3", "2.23.4", "2.30.7"):
        assert nccl_choices(at(h100(), version), 8, sizes) == [("nvls", "Simple")], version
        assert ("nvls", "Simple") not in nccl_estimates(at(a100_hdr_prior(), version), 8, 1, sizes)
    assert compute_capability("A100-SXM4-40GB") == 80 and compute_capability("NVIDIA H200") == 90
    assert compute_capability("NVIDIA A10") == 86 and compute_capability("GPU") is None
    # across servers NVLS runs with SHARP in the network (CollNet); NVLS tree from 2.18 without it
    est = nccl_estimates(at(h100(), "2.19.4"), 64, 8, sizes)
    assert ("nvls", "Simple") not in est and ("nvls_tree", "Simple") in est
    assert ("nvls", "Simple") in nccl_estimates(at(h100(), "2.19.4"), 64, 8, sizes, collnet=True)
    assert ("nvls_tree", "Simple") not in nccl_estimates(at(h100(), "2.17.1"), 64, 8, sizes)


def test_collnet_only_where_the_network_offers_sharp():
    model = at(h100(), "2.14.3")
    assert not any(a.startswith("collnet") for a, _ in nccl_estimates(model, 64, 8, [1 << 20]))
    est = nccl_estimates(model, 64, 8, [1 << 20], collnet=True)
    assert ("collnet_direct", "Simple") in est and ("collnet_chain", "Simple") in est
    assert ("collnet_direct", "LL") not in est  # CollNet runs Simple only
    assert not any(a.startswith("collnet") for a, _ in nccl_estimates(model, 8, 1, [1 << 20], collnet=True))


def test_pat_only_at_one_gpu_per_server():
    one = h100(gpus_per_server=1, nics=1)
    sizes = [1 << 10, 1 << 30]
    assert nccl_choices(at(one, "2.23.4"), 16, sizes, "allgather")[0] == ("pat", "Simple")
    assert ("pat", "Simple") in nccl_estimates(at(one, "2.30.7"), 16, 16, sizes, "reduce_scatter")
    assert not any(a == "pat" for a, _ in nccl_estimates(at(one, "2.22.3"), 16, 16, sizes, "allgather"))
    assert not any(a == "pat" for a, _ in nccl_estimates(at(h100(), "2.30.7"), 16, 2, sizes, "allgather"))
    assert not any(a == "pat" for a, _ in nccl_estimates(at(one, "2.30.7"), 16, 16, sizes, "allreduce"))


def test_point_to_point_is_outside_the_tuning_model():
    model = at(a100_hdr_prior(), "2.18.3")
    assert nccl_estimates(model, 16, 2, [1 << 20], "alltoall") == {}
    assert nccl_choices(model, 16, [1 << 10, 1 << 20], "sendrecv") == [("p2p", "Simple")] * 2
    with pytest.raises(ValueError, match="allreduce, allgather"):
        nccl_estimates(model, 16, 2, [1 << 20], "allscatter")


def test_channels_shrink_below_the_thread_threshold():
    t = tuning_for("2.18.3")
    # Simple: 512 threads x 64 bytes per channel before NCCL adds a channel
    assert channels_used(t, "ring", "Simple", [1024, 5 * 32768, 1 << 30], 16, 8).tolist() == [1, 5, 16]
    assert channels_used(t, "ring", "LL", 8 * 512 * 8 * 3, 16, 8) == 3  # ring LL: threshold x nRanks
    assert channels_used(t, "ring", "Simple", 4 * 256 * 64, 16, 8, ring_bw_GBps=10.0) == 4  # 256 threads
    assert channels_used(t, "nvls", "Simple", 1 << 10, 16, 8) == 16  # NVLS_NCHANNELS
    assert channels_used(tuning_for("2.27.7"), "nvls", "Simple", 1 << 10, 16, 8, cc=100) == 24
    assert channels_used(tuning_for("2.23.4"), "pat", "Simple", 1 << 10, 16, 16) == 16
    assert channels_used(t, "collnet_direct", "Simple", 1 << 10, 16, 8, num_heads=8) == 1


def test_tree_chunks_follow_the_release():
    depth = tree_depth(32, 4)
    assert depth == 9
    old, new = tuning_for("2.19.4"), tuning_for("2.20.5")
    # Simple: 512 KiB halved against depth x 8 / x 4 / x 1 (gone in 2.20)
    assert tree_chunk_bytes(old, "Simple", [1 << 20, 1 << 24, 1 << 30], 16, 4, 32, depth).tolist() == \
        [32768, 65536, 524288]
    assert tree_chunk_bytes(new, "Simple", 1 << 20, 16, 4, 32, depth) == 524288
    assert tree_chunk_bytes(old, "LL", 1 << 20, 16, 4, 32, depth) == 32768  # 64 KiB step, 8 of 16 bytes data
    # LL128: 600 KiB of lines (576000 data bytes) halved while nBytes / (16 x chunk) < nstepsLL128 x 64 / ppn
    # (> 128 KiB) and x 16 / ppn (> 32 KiB); nstepsLL128 = 1 + log2(4 servers) + 0.1 x 8 = 3.8
    assert tree_chunk_bytes(old, "LL128", 1 << 30, 16, 4, 32, depth) == 576000
    assert tree_chunk_bytes(old, "LL128", 1 << 26, 16, 4, 32, depth) == 72000  # 76800 lines x 120/128
    assert tree_chunk_bytes(old, "LL128", 1 << 20, 16, 4, 32, depth) == 18000  # 19200 lines
    assert tree_chunk_bytes(new, "LL128", 1 << 20, 16, 4, 32, depth) == 18000  # data bytes first, same here
    assert isinstance(tree_chunk_bytes(new, "LL128", 1 << 20, 16, 4, 32, depth), int)
    assert np.asarray(tree_chunk_bytes(new, "LL", [1, 2], 16, 4, 32, depth)).shape == (2,)
