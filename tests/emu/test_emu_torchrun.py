"""A real multi-node launch without a cluster: two emulated hosts (network namespaces), a torchrun agent on
each (`--nnodes 2 --nproc-per-node 2`, c10d rendezvous at host 0 over the emulated network), running
`fabriclab collectives bench` unchanged. It must report what the local launcher reports for the same
4 ranks (same rows, #wrong 0), and its record must name the launcher, the hosts and their ranks.
Also: the torchrun launcher (`emu run --launcher torchrun`) gives each worker torchrun's environment inside
its host, and a failing worker stops every host with nothing left running in the namespaces.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from fabriclab.bench.collectives.run import run_bench
from fabriclab.bench.collectives.config import BenchConfig
from fabriclab.emu import netns
from fabriclab.emu.cluster import EmuConfig, emulated_cluster
from fabriclab.emu.launch import exit_code, first_failure, run_in_cluster, torchrun_argv
from fabriclab.emu.state import ClusterState, EmuHost
from fabriclab.fabric.scenario import TopologySpec

BENCH = ["--np", "4", "--algo", "ring,butterfly,native", "--sizes", "4KB,256KB", "--iters", "3", "--max-iters", "3",
         "--warmup", "1"]  # one round: the local run below repeats nothing either
KEY = ("algo", "op", "size_bytes", "count", "dtype", "redop", "root", "num_wrong", "num_ranks", "iters")
PORT = 29660


@pytest.fixture(scope="module")
def two_hosts(emu_root):
    spec = TopologySpec(kind="star", hosts=2, bandwidth_Bps=1e9 / 8)
    with emulated_cluster(spec, config=EmuConfig(measure_rtt=False)) as state:
        yield state


@pytest.mark.root
def test_torchrun_on_two_emulated_hosts_reports_what_the_local_launcher_reports(two_hosts, tmp_path):
    record_path = tmp_path / "bench.json"
    argv = [sys.executable, "-m", "fabriclab", "collectives", "bench", *BENCH, "--json", str(record_path)]
    results = run_in_cluster(argv, timeout_s=120, state=two_hosts, launcher="torchrun", nproc_per_host=2,
                             master_port=PORT)
    assert exit_code(results) == 0, "\n".join(r.output[-2000:] for r in results)
    record = json.loads(record_path.read_text())
    launch = record["config"]["launch"]
    assert (launch["launcher"], launch["num_ranks"], launch["num_hosts"]) == ("torchrun", 4, 2)
    assert launch["backend"] == "gloo" and launch["num_gpus"] == 0
    hosts = {h["host"]: sorted(h["ranks"]) for h in launch["hosts"]}
    assert set(hosts) == {h.namespace for h in two_hosts.hosts} and sorted(sum(hosts.values(), [])) == [0, 1, 2, 3]
    assert all(len(ranks) == 2 for ranks in hosts.values())
    remote = [{k: row[k] for k in KEY} for row in record["results"]]

    local_launch: dict = {}
    config = BenchConfig(algos=("ring", "butterfly", "native"), sizes_bytes=(4096, 262144), iters=3, warmup=1,
                         num_ranks=4)
    local = [{k: row[k] for k in KEY} for row in run_bench(config, on_launch=local_launch.update)]
    assert remote == local and len(local) == 6
    assert all(row["num_wrong"] == 0 for row in remote)
    assert local_launch["launcher"] == "local" and local_launch["num_hosts"] == 1


# One write per line: torchrun runs its workers unbuffered on one shared pipe, where print()'s separate
# writes of the words of two workers interleave ("workerworker 0 0 4").
PRINT_ENV = ("import os, sys; sys.stdout.write(' '.join(['worker', *(os.environ[k] for k in ('RANK', "
             "'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'FABRICLAB_EMU_HOST', 'GLOO_SOCKET_IFNAME'))]) "
             "+ '\\n')")


@pytest.mark.root
def test_torchrun_gives_each_worker_its_place(two_hosts):
    lines: list[str] = []
    results = run_in_cluster([sys.executable, "-c", PRINT_ENV], timeout_s=120, state=two_hosts, launcher="torchrun",
                             nproc_per_host=2, master_port=PORT + 1, on_line=lambda host, line: lines.append(line))
    assert exit_code(results) == 0, "\n".join(r.output[-2000:] for r in results)
    workers = sorted(line.split()[1:] for line in lines if line.split()[:1] == ["worker"])
    by_rank = {int(w[0]): w for w in workers}
    assert sorted(by_rank) == [0, 1, 2, 3]
    for rank, (_, local, world, local_world, host, iface) in by_rank.items():
        assert (int(local), world, local_world) == (rank % 2, "4", "2")
        assert host == two_hosts.hosts[rank // 2].namespace and iface == two_hosts.hosts[rank // 2].iface


@pytest.mark.root
def test_a_failing_worker_stops_every_host_and_leaves_nothing_behind(two_hosts):
    code = "import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.5 if r == 3 else 60); sys.exit(3)"
    start = time.monotonic()
    results = run_in_cluster([sys.executable, "-c", code], timeout_s=90, state=two_hosts, launcher="torchrun",
                             nproc_per_host=2, master_port=PORT + 2)
    assert time.monotonic() - start < 45
    bad = first_failure(results)
    assert bad is not None and bad.rank == 1 and bad.status == "failed" and exit_code(results) != 0
    assert results[0].status == "killed"
    assert all(netns.netns_pids(name) == [] for name in two_hosts.namespaces)


def test_torchrun_agent_command_and_launcher_checks():
    hosts = tuple(EmuHost(rank=r, namespace=f"flh{r}", ip=f"10.77.0.{r + 1}", iface=f"fl{r}") for r in range(3))
    state = ClusterState(spec={}, dilation=1.0, hosts=hosts, switches=(), links=())
    argv = torchrun_argv(state, 2, ["fabriclab", "train", "--np", "4"], 8, master_port=29600)
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    options = dict(zip(argv[3:-5:2], argv[4:-4:2]))
    assert options["--nnodes"] == "3" and options["--node-rank"] == "2" and options["--nproc-per-node"] == "8"
    assert options["--rdzv-endpoint"] == "10.77.0.1:29600" and options["--local-addr"] == "10.77.0.3"
    assert options["--rdzv-backend"] == "c10d" and options["--rdzv-conf"] == "is_host=0"
    assert argv[-5:] == ["--", "fabriclab", "train", "--np", "4"]  # `--`: torchrun leaves --np alone
    assert "is_host=1" in torchrun_argv(state, 0, ["x"], 1)
    with pytest.raises(ValueError, match="use --launcher torchrun"):
        run_in_cluster(["true"], launcher="direct", nproc_per_host=2)
    with pytest.raises(ValueError, match="direct or torchrun"):
        run_in_cluster(["true"], launcher="mpirun")
