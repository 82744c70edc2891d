"""ASTRA-sim as the peer of the LLM step simulator: its configurations for a cluster, the runner's checks and
its reading of `sys[N] finished` lines (always), and, where the binary is here, single collectives against
closed forms (which pin down the size conventions), a trace with a stalled rank, and the example trace and
an LLM step running with every rank finishing."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

from fabriclab.bench.astra import configs
from fabriclab.bench.astra.run import (
    ENV,
    AstraRun,
    AstraSimError,
    CollectiveCase,
    case_graphs,
    check_graphs,
    collective_seconds,
    find_binary,
    run_graphs_in_astra,
)
from fabriclab.fabric.presets import cluster_preset
from fabriclab.workload.chakra import MIN_ALLGATHER_COMM_SIZE
from fabriclab.workload.graph import Op, RankGraph


@functools.cache
def astra_binary() -> Path | None:
    """$FABRICLAB_ASTRA_SIM, else ../shared/tools/astra-sim/bin beside the repository, when it runs here."""
    try:
        binary = find_binary()
    except ValueError:
        return None
    probe = subprocess.run([str(binary)], capture_output=True, text=True, timeout=30)
    return None if "error while loading shared libraries" in probe.stderr else binary


needs_astra = pytest.mark.skipif(astra_binary() is None, reason=f"ASTRA-sim's analytical binary is not here (set "
                                 f"{ENV}, or build it into ../shared/tools/astra-sim/bin; it needs libprotobuf32)")


@pytest.fixture(scope="module")
def h100():
    return cluster_preset("dgx-h100")


# ---- configurations -------------------------------------------------------------------------------

def test_the_network_is_the_nvlink_domain_then_the_scale_out_network(h100):
    nvlink, network = configs.network_config(h100, 32)
    s = h100.server
    assert (nvlink.topology, nvlink.npus, nvlink.bandwidth_Bps, nvlink.latency_s) == \
        ("Switch", 8, s.intra_bandwidth_Bps, s.intra_latency_s)
    # one NDR NIC per GPU at the library's efficiency; 4 servers under one rail leaf: NIC -> leaf -> NIC
    assert (network.npus, network.bandwidth_Bps) == (4, pytest.approx(s.nic_bandwidth_Bps * s.nic_efficiency))
    assert 2 * network.latency_s == pytest.approx(2 * s.nic_latency_s)
    big = configs.network_config(h100, 8 * 64)[1]  # 64 servers: more than a rail leaf's 32 ports, via a spine
    assert 2 * big.latency_s == pytest.approx(4 * s.nic_latency_s)
    assert [d.npus for d in configs.network_config(h100, 8)] == [8]  # one server: one dimension
    assert [d.npus for d in configs.network_config(cluster_preset("tx-gaia-25gbe"), 6)] == [2, 3]


def test_the_yaml_gives_bandwidth_in_gib_per_second_and_latency_in_ns(h100):
    text = configs.network_yaml(configs.network_config(h100, 16))
    values = {line.split(":")[0]: line.split(":")[1].split("#")[0].strip() for line in text.splitlines()
              if not line.startswith("#")}
    assert values["topology"] == "[ Switch, Switch ]" and values["npus_count"] == "[ 8, 2 ]"
    bandwidth = [float(x) * 2**30 for x in values["bandwidth"].strip("[] ").split(",")]
    assert bandwidth[0] == pytest.approx(h100.server.intra_bandwidth_Bps, rel=1e-12)
    assert [float(x) for x in values["latency"].strip("[] ").split(",")] == [750.0, 130.0]


@pytest.mark.parametrize("gpus, fragment", [(12, "give a multiple of 8"), (1, "at least 2 NPUs")])
def test_a_network_astra_sim_cannot_build_is_refused(h100, gpus, fragment):
    with pytest.raises(ValueError, match=fragment):
        configs.network_config(h100, gpus)


def test_the_system_file_replays_compute_and_runs_what_nccl_runs(tmp_path, h100):
    system = configs.system_config(2)
    assert system["all-reduce-implementation"] == ["ring", "ring"] and system["all-to-all-implementation"] == \
        ["direct", "direct"]
    assert system["roofline-enabled"] == 0 and system["replay-only"] == 0  # comm always simulated
    assert system["preferred-dataset-splits"] <= MIN_ALLGATHER_COMM_SIZE
    roof = configs.system_config(1, roofline=True, peak_flops=989.4e12, memory_bandwidth_Bps=3.35e12)
    assert (roof["roofline-enabled"], roof["peak-perf"], roof["local-mem-bw"]) == (1, pytest.approx(989.4),
                                                                                  pytest.approx(3350))
    with pytest.raises(ValueError, match="peak FLOP/s"):
        configs.system_config(1, roofline=True)
    files = configs.write_configs(tmp_path / "c", h100, 16)
    assert json.loads(files.memory.read_text()) == {"memory-type": "NO_MEMORY_EXPANSION"}
    assert json.loads(files.system.read_text())["reduce-scatter-implementation"] == ["ring", "ring"]


# ---- the runner without the binary ----------------------------------------------------------------

def test_the_binary_is_looked_up_and_a_missing_one_says_how_to_give_it(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "AstraSim_Analytical_Congestion_Unaware"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_binary(tmp_path) == fake and find_binary(fake) == fake
    monkeypatch.chdir(tmp_path)
    assert find_binary("bin") == fake  # absolute: ASTRA-sim runs in the folder of its files
    monkeypatch.setenv(ENV, str(fake.parent))
    assert find_binary() == fake
    with pytest.raises(ValueError, match=f"--astra-sim {tmp_path / 'nothing'}: no executable ASTRA-sim.*{ENV}"):
        find_binary(tmp_path / "nothing")
    monkeypatch.setenv(ENV, str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match=f"\\${ENV}"):
        find_binary()


def test_a_run_names_the_ranks_that_never_finished(tmp_path):
    run = AstraRun(finish_ns={0: 5000, 2: 7000}, num_ranks=4, wall_s=0.1, folder=tmp_path)
    assert run.unfinished == [1, 3] and run.step_s == 7e-6
    with pytest.raises(AstraSimError, match="without finishing ranks 1, 3 of 4"):
        run.check()
    assert AstraRun(finish_ns={0: 1, 1: 2}, num_ranks=2, wall_s=0.0, folder=tmp_path).check().step_s == 2e-9


def graph(rank: int, num_ranks: int, *ops: Op, groups: dict | None = None) -> RankGraph:
    return RankGraph(rank=rank, num_ranks=num_ranks, ops=ops, communicators=groups)


def test_graphs_astra_sim_could_not_finish_are_refused_before_it_runs():
    send = Op(id=0, name="s", kind="comm", collective="send", peer=1, size_bytes=100)
    recv = Op(id=0, name="r", kind="comm", collective="recv", peer=0, size_bytes=100)
    assert check_graphs([graph(0, 2, send), graph(1, 2, recv)]) == 2
    with pytest.raises(ValueError, match=r"ranks \[1\] of 2 have no graph"):
        check_graphs([graph(0, 2, send)])
    short = Op(id=0, name="r", kind="comm", collective="recv", peer=0, size_bytes=99)
    with pytest.raises(ValueError, match=r"rank 0 posts sends of \[100\] bytes to rank 1, which posts receives of "
                                         r"\[99\]"):
        check_graphs([graph(0, 2, send), graph(1, 2, short)])
    ar = Op(id=0, name="ar", kind="comm", collective="allreduce", communicator="tp", size_bytes=8)
    with pytest.raises(ValueError, match="communicator 'tp'"):
        check_graphs([graph(0, 2, ar), graph(1, 2, ar, groups={"tp": [0, 1]})])
    idle = Op(id=0, name="idle", kind="compute")
    many = [graph(r, 4400, idle, groups={"pair": [r - r % 2, r - r % 2 + 1]}) for r in range(4400)]
    with pytest.raises(ValueError, match="2200 communicator groups: .* at most 2147"):
        check_graphs(many)


def test_a_case_is_its_collective_on_its_ranks_and_nothing_elsewhere():
    graphs = case_graphs(CollectiveCase(collective="allgather", ranks=(2, 0), size_bytes=1 << 20), 4)
    assert [g.ops[0].collective for g in graphs] == ["allgather", "", "allgather", ""]
    assert graphs[0].communicators == {"case": [0, 2]} and graphs[1].communicators == {}
    p2p = case_graphs(CollectiveCase(collective="sendrecv", ranks=(3, 1), size_bytes=64), 4)
    assert (p2p[3].ops[0].collective, p2p[3].ops[0].peer, p2p[1].ops[0].collective, p2p[1].ops[0].peer) == \
        ("send", 1, "recv", 3)
    assert check_graphs(p2p) == 4


def test_a_folder_whose_path_holds_empty_is_refused(tmp_path, h100):
    # ASTRA-sim would silently read no communicator groups (Workload.cc initialize_comm_groups)
    with pytest.raises(ValueError, match="'empty'"):
        run_graphs_in_astra(case_graphs(CollectiveCase(collective="allreduce", ranks=(0, 1), size_bytes=8), 2),
                            h100, Path("/bin/true"), timeout_s=10, folder=tmp_path / "empty")


# ---- in ASTRA-sim ---------------------------------------------------------------------------------

def one(cluster, collective: str, ranks: tuple[int, ...], size: int, num_ranks: int) -> float:
    case = CollectiveCase(collective=collective, ranks=ranks, size_bytes=size)
    return collective_seconds([case], cluster, num_ranks, astra_binary(), timeout_s=60)[0][case]


@needs_astra
@pytest.mark.parametrize("collective, steps", [("allgather", 3), ("reduce_scatter", 3), ("allreduce", 6)])
def test_collectives_in_one_server_take_their_ring_steps_of_one_rank_share(h100, collective, steps):
    """A ring of 4 GPUs moves 3 (all-gather, reduce-scatter) or 6 (all-reduce) steps of a quarter of the
    buffer, in preferred-dataset-splits chunks each paying a switch's 2 hops of latency per step: with
    ASTRA-sim's all-gather comm_size one rank's part, not the gathered buffer (which takes 4x as long)."""
    size = 256 << 20
    seconds = one(h100, collective, (0, 2, 4, 6), size, 16)
    s = h100.server
    closed = steps * size / 4 / s.intra_bandwidth_Bps + configs.SPLITS * steps * 2 * s.intra_latency_s
    assert seconds == pytest.approx(closed, rel=1e-3)


@needs_astra
def test_a_send_across_servers_takes_the_nic_share(h100):
    size = 64 << 20
    seconds = one(h100, "sendrecv", (0, 8), size, 16)
    nic = h100.server.nic_bandwidth_Bps * h100.server.nic_efficiency
    assert seconds == pytest.approx(size / nic, rel=0.01)


@needs_astra
def test_a_stalled_rank_is_named(tmp_path, h100):
    """Rank 1 never reaches the all-reduce of its group: ASTRA-sim exits 0, and rank 0 has no finish line."""
    ar = Op(id=0, name="ar", kind="comm", collective="allreduce", communicator="tp", size_bytes=1 << 20)
    idle = Op(id=0, name="idle", kind="compute", duration_s=1e-6)
    graphs = [graph(0, 2, ar, groups={"tp": [0, 1]}), graph(1, 2, idle, groups={"tp": [0, 1]})]
    run = run_graphs_in_astra(graphs, h100, astra_binary(), timeout_s=60, folder=tmp_path / "stall")
    assert run.unfinished == [0] and run.finish_ns == {1: 1000}
    with pytest.raises(AstraSimError, match="without finishing ranks 0 of 2"):
        run.check()


@needs_astra
def test_the_chakra_example_runs_with_every_rank_finishing(tmp_path, h100):
    from fabriclab.whatif.graph_run import run_graphs, sample_graphs

    graphs = sample_graphs(16)
    run = run_graphs_in_astra(graphs, h100, astra_binary(), timeout_s=60, folder=tmp_path / "ex").check()
    ours = run_graphs(graphs, h100)
    assert run.step_s == pytest.approx(ours.step_s, rel=0.05)
    assert (tmp_path / "ex" / "trace.comm_groups.json").exists() and (tmp_path / "ex" / "trace.15.et").exists()


@needs_astra
def test_an_llm_step_runs_in_both_tools_within_five_percent(h100, tmp_path):
    from fabriclab.bench.astra.step import compare_step
    from fabriclab.workload.parallel import ParallelConfig
    from fabriclab.workload.transformer import load_model

    class Job:
        spec = load_model("llama3-8b")
        par = ParallelConfig(num_gpus=16, tp=2, pp=2, mbs=1, gbs=16, seq=4096, sequence_parallel=True, zero=1)

    result = compare_step(Job, h100, astra_binary(), timeout_s=120, folder=tmp_path / "replay")
    assert result["astra_sim"]["finished"] == 16 and result["astra_sim"]["unfinished"] == []
    assert result["ratio"] == pytest.approx(1.0, abs=0.05)
    rows = {(r["communicator"], r["collective"]): r for r in result["collectives"]}
    assert rows[("pp", "sendrecv")]["ranks"] == [0, 8] and all(r["astra_s"] > 0 for r in rows.values())
    # ASTRA-sim's roofline needs num_ops and tensor_size on every compute node, or ranks never finish
    roofline = compare_step(Job, h100, astra_binary(), timeout_s=120, collectives=False, roofline=True,
                            folder=tmp_path / "roofline")
    assert roofline["astra_sim"]["unfinished"] == [] and roofline["ratio"] == pytest.approx(1.0, abs=0.05)


def test_an_nvl72_domain_is_one_dimension_of_its_gpus_then_the_racks():
    nvl = cluster_preset("gb200-nvl72")
    assert [(d.npus, d.name) for d in configs.network_config(nvl, 144)] == [(72, "nvswitch inside a server"),
                                                                          (2, "rail network")]
    assert [d.npus for d in configs.network_config(nvl, 16)] == [16]  # 16 GPUs of 4 trays: NVLink only


@needs_astra
def test_a_step_inside_one_nvl72_domain_runs_in_both_tools(tmp_path):
    """16 GPUs of one GB200 NVL72 (4 trays, one NVLink dimension): the shipped ASTRA-sim build crashes at its end
    on such a dimension (SIGABRT or SIGSEGV) after every rank finished; the run is read and says so."""
    from fabriclab.bench.astra.step import compare_step
    from fabriclab.workload.parallel import ParallelConfig
    from fabriclab.workload.transformer import load_model

    class Job:
        spec = load_model("llama3-8b")
        par = ParallelConfig(num_gpus=16, tp=4, pp=2, mbs=1, gbs=16, seq=4096, sequence_parallel=True, zero=1)

    result = compare_step(Job, cluster_preset("gb200-nvl72"), astra_binary(), timeout_s=120, collectives=False,
                          folder=tmp_path / "nvl")
    assert result["astra_sim"]["unfinished"] == [] and result["ratio"] == pytest.approx(1.0, abs=0.08)


def test_snake_ring_crosses_servers_between_gpus_of_one_local_index():
    from fabriclab.bench.astra.configs import snake_ring

    ring = snake_ring((0, 2, 4, 6, 8, 10, 12, 14), 8)
    assert ring == [0, 2, 4, 6, 14, 12, 10, 8]
    hops = list(zip(ring, ring[1:] + ring[:1]))
    crossing = [(a, b) for a, b in hops if a // 8 != b // 8]
    assert crossing and all(a % 8 == b % 8 for a, b in crossing)
    assert snake_ring((3, 1, 2), 8) == [1, 2, 3]
