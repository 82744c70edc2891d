"""Predict an nccl-tests table for a cluster model: NCCL's rings and trees on the servers' real topology.

For every size the library runs the algorithm (ring; tree across servers for allreduce) and protocol
(LL, LL128, Simple) that the tuning model of its NCCL version picks (`nccl/choice.py`; or the cheapest by
this model, `selection: fastest`), and what that choice costs here is

    max(launches, latency + bytes) + host overhead,    launches = launch_s x GPUs the process drives
    latency = base + intra steps x intra_step + network steps x net_step
              ring: 2(n-1) steps for allreduce, 2(servers-1) of them across the network
              tree: 2((GPUs per server - 1) intra + floor(log2 servers) network)
    bytes   = max(link time / (protocol link factor x algorithm efficiency),
                  bus bytes / (protocol cap x channels running / channels))
              + tree: the pipeline's fill and drain (`nccl/pipeline.py`)
              + chunk x protocol per-byte cost + size / memory pass rate
              (chunk: size / n for a ring, whose steps each handle one rank's share; size for a tree)

The *link time* comes from the flow-level simulator on the cluster's topology (`nccl/links.py`), with the
channels NCCL runs at that size (it drops channels for small buffers: `nccl/pipeline.py`; where it does,
the bytes are charged as shared over size / (threads x threshold) channels, `smooth_channels`, so that
adding a channel never makes a larger buffer cheaper).

The protocol's factors are the cluster's own (`library.protocol_spec`): what its logs fitted, or where
nothing was fitted (a preset) NCCL's own for LL: half of the link (8 data bytes per 16-byte line), at most
the busBw NCCL's tuning model of its release gives LL (llMaxBws on every channel), and no per-byte extra;
a ring broadcast/reduce then also pays NCCL's own latency (a step per rank at the tree's Simple hop). So
the cost of what NCCL picks agrees with NCCL's own estimate of it (issue 47: a 1 MiB all-reduce on 2 H100s
cost 124 us with LL, the 2 MiB one 22 us with Simple; now 16 and 22 us). Where NCCL's pick still costs
more than another pair (a tree's pipeline fill, which its estimate leaves out), `choice_notes` says so.

Try it: `python -c "from fabriclab.fabric.cluster import a100_hdr_prior as c;
from fabriclab.nccl.predict import predict_nccl_table as p; print(p(c(), 16, [1 << 20, 1 << 30])[1])"`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.fabric.buildings import tier_latency_s
from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.domains import domain_view
from fabriclab.nccl.choice import nccl_choices, nccl_estimates, under_env
from fabriclab.nccl.layout import layout, steps
from fabriclab.nccl.library import nccl_own, protocol_spec, step_latencies
from fabriclab.nccl.congestion import congested_seconds
from fabriclab.nccl.links import link_seconds_per_byte, overload
from fabriclab.nccl.logs import NcclRow, NcclRun
from fabriclab.nccl.pipeline import active_channels, smooth_channels, tree_fill_s
from fabriclab.nccl.versions import p2p_net_channels, table_of

# NCCL's ring (and tree) collectives, and its point-to-point ones (every pair at once, or one neighbour).
P2P = ("alltoall", "sendrecv")
MODELLED = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", *P2P)
# Algorithms this module costs on the topology; NCCL's others cost its own estimate.
COSTED = ("ring", "tree", "p2p", "pat")
# A ring with LL128 where every step crosses the network (one GPU per server) moves 0.7 of what NCCL's
# model gives LL128 elsewhere (0.92): NCCL's tuning model said so up to 2.22 (`ring_ll128_ppn1_factor`,
# src/graph/tuning.cc `ppn < 2 ? 0.7 : 0.92`). 2.23 dropped the factor from its choice; the cost stays
# (Google's 2-GPU B200 all_gather and H200 all_reduce, NCCL 2.26 / 2.25, run LL128 at 0.70-0.87 of 0.92).
_LAST_PPN1 = table_of("2.22.3")
LL128_ONE_PER_SERVER = _LAST_PPN1.ring_ll128_ppn1_factor / _LAST_PPN1.ring_ll128_factor
DTYPE_SIZES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "int32": 4,
               "int8": 1, "uint8": 1, "int64": 8}


def candidate_times(cluster: ClusterModel, num_gpus: int, sizes_bytes, collective: str = "allreduce", *,
                    gpus_per_process: int = 1) -> dict[tuple[str, str], np.ndarray]:
    """(algorithm, protocol) -> time in seconds at every size, for the candidates the library may pick."""
    if collective not in MODELLED:
        raise ValueError(f"collective {collective!r}: a cluster model predicts {', '.join(MODELLED)}")
    cluster = domain_view(cluster, num_gpus)  # an NVLink domain across trays is one node to the library
    lay = layout(cluster, num_gpus)
    lib, server = cluster.library, cluster.server
    size = np.asarray(sizes_bytes, dtype=np.float64)
    bus = size * bus_bandwidth_factor(collective, lay.num_gpus)
    nsteps, ninter = steps(collective, lay)
    launches = gpus_per_process * lib.launch_s
    memory = size / server.memory_bandwidth_Bps
    latencies = step_latencies(cluster)
    if collective in P2P:
        return {("p2p", "Simple"): _p2p_times(cluster, lay, size, collective, latencies["ring"]["Simple"], launches)}
    out = {}
    for algo in lib.algorithms:
        # a tree runs allreduce only; on one server it is a chain NCCL's own model may pick (with LL turned
        # off, NCCL_PROTO=^LL, tree/Simple beats the rings at small sizes), costed as one
        if algo == "tree" and (collective != "allreduce" or (lay.num_servers == 1 and lib.selection != "nccl")):
            continue
        efficiency = lib.tree_efficiency if algo == "tree" else 1.0
        for proto in lib.protocols:
            spec = protocol_spec(cluster, algo, proto, lay.num_gpus, lay.num_servers, collective)
            lat = latencies[algo][proto]
            if algo == "ring" and collective in ("broadcast", "reduce") and nccl_own(cluster):
                # NCCL's own latency of a ring that does not share channels: a step per rank, each at the
                # tree's Simple hop (the pipeline of a Simple chunk) or the ring's LL/LL128 one, all across
                # the network when it spans servers (src/graph/tuning.cc; `choice._latency`)
                hop = latencies["tree" if proto == "Simple" else "ring"][proto]
                latency = lat.base_s + nsteps * (hop.net_step_s if lay.num_servers > 1 else hop.intra_step_s)
            elif algo == "ring":
                latency = lat.base_s + (nsteps - ninter) * lat.intra_step_s + ninter * lat.net_step_s
            else:
                latency = lat.base_s + 2 * ((lay.per_server - 1) * lat.intra_step_s
                                            + int(math.log2(lay.num_servers)) * lat.net_step_s)
            latency += tier_latency_s(cluster.network, lay.num_servers, algo, collective)  # across buildings
            channels = active_channels(cluster, num_gpus, algo, proto, size, collective)
            wire = spec.link_factor
            if algo == "ring" and proto == "LL128" and lay.per_server == 1 and lay.num_servers > 1:
                wire *= LL128_ONE_PER_SERVER  # every step of the ring crosses the network
            # the link time of the channels NCCL runs, their bytes shared as `smooth_channels` says
            shared = smooth_channels(cluster, num_gpus, algo, proto, size, channels)
            data = _link_time(cluster, num_gpus, algo, collective, channels) * size * channels / shared \
                / (wire * efficiency)
            data = congested_seconds(data, overload(cluster, num_gpus, algo, collective), cluster.network.transport)
            data = _hidden_under_steps(cluster, num_gpus, algo, collective, channels, data,
                                       size * channels / shared / (wire * efficiency), latency - lat.base_s)
            if spec.busbw_cap_Bps is not None:  # a per-channel ceiling: the channels NCCL runs at this size
                # (LL's ceiling stands on every channel: NCCL drops an LL channel only while each thread still
                # has a line per step to move, where the step latency and not the threads' rate decides)
                running = lib.num_channels if proto == "LL" else shared
                data = np.maximum(data, bus / (spec.busbw_cap_Bps * running / lib.num_channels))
            if algo == "tree":
                data = data + tree_fill_s(cluster, num_gpus, proto, size)
            # a ring step handles one rank's chunk (size / n); a tree passes the whole buffer down its chain.
            # (NCCL drops channels only while every thread keeps its threshold of bytes, so the per-byte
            # work does not grow as channels go: the 2-GPU log's small LL rows say so.)
            chunk = size / lay.num_gpus if algo == "ring" else size
            work = latency + data + chunk * spec.per_byte_s + memory
            out[(algo, proto)] = np.maximum(launches, work) + lib.host_overhead_s
    if lib.selection == "nccl":
        # NVLS, NVLS-tree, CollNet and PAT: no log here runs them, so they cost what NCCL's own model of the
        # release says (`nccl/choice.py`), plus this cluster's launch, memory pass and host costs
        estimates = nccl_estimates(cluster, num_gpus, lay.num_servers, size, collective)
        for key, us in estimates.items():
            if key[0] not in COSTED:
                out[key] = np.maximum(launches, us * 1e-6 + memory) + lib.host_overhead_s
        if ("nvls_tree", "Simple") in out and lay.num_servers > 1:
            out[("nvls_tree", "Simple")] = _nvls_tree_network(cluster, num_gpus, size, out[("nvls_tree", "Simple")])
        if ("pat", "Simple") in estimates:
            out[("pat", "Simple")] = _pat_times(cluster, num_gpus, lay, size, collective, latencies["ring"]["Simple"],
                                                launches, memory)
    # what NCCL_ALGO / NCCL_PROTO / NCCL_NVLS_ENABLE turn off, the library cannot pick
    out = under_env(cluster, num_gpus, lay.num_servers, collective, out)
    return out


def _plain(network):
    """The same servers on a non-blocking D-mod-K fabric that nothing else shares."""
    return replace(network, bisection=1.0, routing="ideal", transport="ideal", placement="packed", busy_share=0.0)


def _hidden_under_steps(cluster: ClusterModel, num_gpus: int, algo: str, collective: str, channels: np.ndarray,
                        data: np.ndarray, bytes_: np.ndarray, steps_s) -> np.ndarray:
    """The data time of a ring or tree with what the fabric adds to it hidden, as far as it goes, under the
    latency of its steps. A pipelined collective leaves its network links idle for the latency of every
    step (the handshake and the hops before the next chunk may go); a link slowed by oversubscription,
    hashing, congestion control or other jobs fills that idle time before it delays anything. So the time
    the fabric adds over the same servers on a non-blocking D-mod-K fabric (`free`) costs only where it
    passes the steps' latency: `free + max(0, data - free - steps)`. Where the fabric is plain, nothing
    changes; where the bytes dominate (hundreds of MiB), the fabric's whole cost shows. Beside SimAI's
    ns-3 (docs/measurements/simai/), a 4:1 tree slows a 16-32 MiB ring 1.1-1.2x, not the 1.6-1.8x the
    sum of latency and routed bytes gave."""
    plain = _plain(cluster.network)
    if cluster.network == plain:
        return data
    free = _link_time(replace(cluster, network=plain), num_gpus, algo, collective, channels) * bytes_
    return free + np.maximum(0.0, data - free - steps_s)


def _nvls_tree_network(cluster: ClusterModel, num_gpus: int, size: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """NVLS-tree's time with what the fabric adds. NCCL's estimate has no topology; between the servers its
    bytes cross the NICs as a ring's would (every server sends and receives its share of the buffer), so an
    oversubscribed, hashed, congested or shared tier adds to it what it adds to those bytes: their data time
    here less their data time on a non-blocking D-mod-K fabric of the same servers (nothing on that fabric,
    so NCCL's own estimate stands there)."""
    network = cluster.network
    plain = _plain(network)
    if network == plain:
        return estimate
    data = link_seconds_per_byte(cluster, num_gpus, "ring", "allreduce") * size
    data = congested_seconds(data, overload(cluster, num_gpus, "ring", "allreduce"), network.transport)
    base = link_seconds_per_byte(replace(cluster, network=plain), num_gpus, "ring", "allreduce") * size
    return estimate + np.maximum(0.0, data - base)


def _pat_times(cluster: ClusterModel, num_gpus: int, lay, size: np.ndarray, collective: str, lat,
               launches: float, memory: np.ndarray) -> np.ndarray:
    """NCCL's PAT (allgather / reduce_scatter at one GPU per server, 2.23+) on the topology: each rank moves
    the ring's bytes ((n-1)/n of the buffer) over the same links, at the busbw share NCCL's own model gives
    PAT (`busBw *= .75`, 0.85 in 2.23), in log2(servers) rounds: latency = the ring Simple base + log2i(servers)
    x the network step / 3.5 + 2.8 us per rank (v2.24+ src/graph/tuning.cc, `NCCL_ALGO_PAT` latency). Costed
    by NCCL's estimate instead, a 2-GPU B200 all_gather at 1-4 MiB came out 2-4x faster than Google's
    measurement (examples/nccl-corpus/gke-a4-b200-1gpu)."""
    from fabriclab.nccl.versions import table_of

    lib, table = cluster.library, table_of(cluster.library.nccl_version)
    _, divisor, per_rank_us = table.pat_latency_us  # the base is the ring Simple base, fitted
    latency = lat.base_s + int(math.log2(lay.num_servers)) * lat.net_step_s / divisor + lay.num_gpus * per_rank_us * 1e-6
    channels = active_channels(cluster, num_gpus, "pat", "Simple", size, collective)
    spec = lib.protocols["Simple"]
    data = _link_time(cluster, num_gpus, "ring", collective, channels) * size / (spec.link_factor * (table.pat_factor or 1.0))
    return np.maximum(launches, latency + data + memory) + lib.host_overhead_s


def _p2p_times(cluster: ClusterModel, lay, size: np.ndarray, collective: str, lat, launches: float) -> np.ndarray:
    """NCCL's point-to-point: every rank sends to its peers at once (alltoall: size / n to each of the n - 1
    others; sendrecv: the whole buffer to the next rank), Simple protocol. Each peer costs one step of the
    ring's Simple latency (intra-server or network), the peers are served `num_channels` at a time; the
    bytes take the flow-simulated link time of all those transfers together (`nccl/links.py`: on a plain
    fat tree they cross the spines, with PXN on a rail fabric they stay on their rail)."""
    lib, server = cluster.library, cluster.server
    if collective == "sendrecv":
        remote = lay.num_servers > 1
        latency = lat.base_s + (lat.net_step_s if remote else lat.intra_step_s)
    else:
        intra, net = lay.per_server - 1, lay.num_gpus - lay.per_server
        latency = lat.base_s + (intra * lat.intra_step_s + net * lat.net_step_s) / lib.num_channels
    data = link_seconds_per_byte(cluster, lay.num_gpus, "p2p", collective) * size / lib.protocols["Simple"].link_factor
    data = congested_seconds(data, overload(cluster, lay.num_gpus, "p2p", collective), cluster.network.transport)
    if collective == "sendrecv" and lay.num_servers > 1 and lib.p2p_channel_bandwidth_Bps:
        # the few channels NCCL gives a peer across the network, each at its calibrated rate
        channels = p2p_net_channels(lib.nccl_version, lay.num_gpus, lay.num_servers, lib.num_channels,
                                    max(1, server.nics_per_server // server.gpus_per_server),
                                    server.nic_bandwidth_Bps / 1e9)
        data = np.maximum(data, size / (channels * lib.p2p_channel_bandwidth_Bps))
    latency += tier_latency_s(cluster.network, lay.num_servers, "p2p", collective)  # across buildings
    work = latency + data + size / server.memory_bandwidth_Bps
    return np.maximum(launches, work) + lib.host_overhead_s


def _link_time(cluster: ClusterModel, num_gpus: int, algorithm: str, collective: str,
               channels: np.ndarray) -> np.ndarray:
    """Link seconds per byte at each size, simulated with the channels NCCL runs there."""
    out = np.empty(channels.shape)
    for c in np.unique(channels):
        lib = cluster.library
        model = cluster if c == lib.num_channels else replace(cluster, library=replace(lib, num_channels=int(c)))
        out[channels == c] = link_seconds_per_byte(model, num_gpus, algorithm, collective)
    return out


def collective_times(cluster: ClusterModel, num_gpus: int, sizes_bytes, collective: str = "allreduce", *,
                     gpus_per_process: int = 1, in_place: bool = False) -> tuple[np.ndarray, list[str]]:
    """Time in seconds at every size and the `algorithm/protocol` the library picks there."""
    size = np.asarray(sizes_bytes, dtype=np.float64)
    cluster = domain_view(cluster, num_gpus)
    lib = cluster.library
    if num_gpus == 1:  # one rank: a local copy out of place, nothing in place
        launches = gpus_per_process * lib.launch_s
        copy = np.zeros_like(size) if in_place else np.maximum(launches, size / cluster.server.memory_bandwidth_Bps)
        return copy + lib.host_overhead_s, ["copy"] * size.size
    candidates = candidate_times(cluster, num_gpus, size, collective, gpus_per_process=gpus_per_process)
    labels = list(candidates)
    stacked = np.stack([candidates[k] for k in labels])
    if lib.selection == "nccl" and collective not in P2P:
        chosen = nccl_choices(cluster, num_gpus, size, collective, layout(cluster, num_gpus).num_servers)
        best = np.array([labels.index(c) for c in chosen])
    else:
        best = stacked.argmin(axis=0)
    return stacked[best, np.arange(size.size)], [f"{labels[i][0]}/{labels[i][1]}" for i in best]


def predict_nccl_table(cluster: ClusterModel, num_gpus: int, sizes_bytes, collective: str = "allreduce", *,
                       gpus_per_process: int = 1, dtype: str = "float", redop: str = "sum") -> list[dict]:
    """nccl-tests rows (size, count, type, redop, root, time, algbw, busbw out of place and in place)
    predicted for `num_gpus` GPUs of `cluster`, plus the algorithm/protocol chosen at each size."""
    sizes = [int(s) for s in sizes_bytes]
    if not sizes or min(sizes) < 1:
        raise ValueError("give at least one size of 1 byte or more")
    itemsize = DTYPE_SIZES.get(dtype, 4)
    factor = bus_bandwidth_factor(collective, num_gpus) if num_gpus > 1 else 0.0
    oop, choice = collective_times(cluster, num_gpus, sizes, collective, gpus_per_process=gpus_per_process)
    inp, _ = collective_times(cluster, num_gpus, sizes, collective, gpus_per_process=gpus_per_process,
                              in_place=True)
    rows = []
    for size, t_out, t_in, pick in zip(sizes, oop, inp, choice):
        algbw_out, algbw_in = size / t_out / 1e9, size / t_in / 1e9
        # nccl-tests prints the count per rank where the buffer is split among the ranks, and `sum` as
        # sendrecv's (unused) redop
        per_rank = collective in ("allgather", "reduce_scatter", "alltoall")
        rows.append({"size_bytes": size, "count": size // itemsize // (num_gpus if per_rank else 1), "dtype": dtype,
                     "redop": redop if collective in ("allreduce", "reduce", "reduce_scatter", "sendrecv") else "none",
                     "root": 0 if collective in ("reduce", "broadcast") else -1,
                     "time_us": float(t_out * 1e6), "algbw_GBps": float(algbw_out),
                     "busbw_GBps": float(algbw_out * factor), "inplace_time_us": float(t_in * 1e6),
                     "inplace_algbw_GBps": float(algbw_in), "inplace_busbw_GBps": float(algbw_in * factor),
                     "algorithm": pick})
    return rows


def prediction_run(cluster: ClusterModel, num_gpus: int, rows: list[dict], collective: str = "allreduce", *,
                   gpus_per_process: int = 1) -> NcclRun:
    """Predicted rows as an NcclRun (servers named `server-000`, ...) for `nccl/log_writer.py`."""
    cluster = domain_view(cluster, num_gpus)
    lay = layout(cluster, num_gpus)
    hosts = tuple(f"server-{r // lay.per_server:03d}" for r in range(num_gpus))
    fields = set(NcclRow.__dataclass_fields__)
    return NcclRun(source=f"prediction for {cluster.name}", collective=collective, hosts=hosts,
                   gpus_per_process=gpus_per_process, device_name=cluster.server.gpu_name,
                   rows=tuple(NcclRow(**{k: v for k, v in r.items() if k in fields}) for r in rows))


def choice_notes(cluster: ClusterModel, num_gpus: int, sizes_bytes, collective: str = "allreduce", *,
                 gpus_per_process: int = 1) -> list[str]:
    """Lines for the output wherever NCCL's pick (its own estimate, `nccl/choice.py`) is not the pair this
    model costs lowest, one per run of sizes with the same two pairs, and where the time falls from one size
    to the next larger because NCCL leaves such a pick there. NCCL runs what it picks even when slower, so
    the time is the cost of its pick; the lines say where its estimate and this model disagree. The one
    mechanism that makes a fall at the preset clusters (`tests/nccl/test_monotone.py`): a tree's pipeline
    (its chunks climb the chain and the tree hop by hop, LL held back at every network hop, `nccl/pipeline.py`)
    that NCCL's estimate leaves out, so NCCL keeps a tree a size or two past where it costs more than the
    pair it switches to. On a fabric that hashes flows or cuts rates (`roce-h100`), a second: NCCL's estimate
    has no fabric, so it keeps LL, whose doubled bytes pay the congestion, a size past where LL128 costs
    less. Empty for a library that is not NCCL and for point-to-point collectives."""
    from fabriclab.units import format_size

    lib = cluster.library
    if lib.selection != "nccl" or collective in P2P or num_gpus < 2:
        return []
    order = np.argsort(np.asarray(sizes_bytes, dtype=np.float64), kind="stable")
    size = np.asarray(sizes_bytes, dtype=np.float64)[order]
    view = domain_view(cluster, num_gpus)
    nodes = layout(view, num_gpus).num_servers
    candidates = candidate_times(view, num_gpus, size, collective, gpus_per_process=gpus_per_process)
    picks = nccl_choices(view, num_gpus, size, collective, nodes)
    runnable = nccl_estimates(view, num_gpus, nodes, size[:1], collective)  # what NCCL may pick here at all
    candidates = {k: v for k, v in candidates.items() if k in runnable or k in picks}
    labels = list(candidates)
    stacked = np.stack([candidates[k] for k in labels])
    cheapest = [labels[i] for i in stacked.argmin(axis=0)]
    cost = np.array([candidates[p][i] for i, p in enumerate(picks)])
    lines, runs = [], []
    for i, (pick, best) in enumerate(zip(picks, cheapest)):
        if pick != best and candidates[pick][i] > candidates[best][i] * (1 + 1e-9):
            if runs and runs[-1][1] == i - 1 and tuple(runs[-1][2:]) == (pick, best):
                runs[-1][1] = i
            else:
                runs.append([i, i, pick, best])
    for first, last, pick, best in runs:
        where = format_size(int(size[first])) + ("" if first == last else f"-{format_size(int(size[last]))}")
        worse = max(candidates[pick][i] / candidates[best][i] - 1 for i in range(first, last + 1))
        lines.append(f"{where}: NCCL runs {'/'.join(pick)} by its own estimate; here {'/'.join(best)} costs "
                     f"less (NCCL's pick up to {worse:.0%} more)")
    for i in range(size.size - 1):
        if cost[i + 1] < cost[i] * (1 - 1e-9):
            lines.append(f"{format_size(int(size[i]))} -> {format_size(int(size[i + 1]))}: the time falls "
                         f"({cost[i] * 1e6:.4g} -> {cost[i + 1] * 1e6:.4g} us) where NCCL leaves "
                         f"{'/'.join(picks[i])}, which costs more here than its estimate says, for "
                         f"{'/'.join(picks[i + 1])}")
    return lines
