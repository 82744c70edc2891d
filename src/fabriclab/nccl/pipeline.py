"""What NCCL does to a collective at medium sizes: fewer channels, and a tree's pipeline that must fill.

Two mechanisms of NCCL's own code that a steady-state bandwidth leaves out, both from the source of the
version the cluster runs (`nccl/versions.py` holds the constants with their files and tags):

* **Channels at a size.** NCCL runs a collective on fewer channels (and threads) when the buffer is small
  for them: while size < channels x threads x threshold it drops a channel (`enqueue.cc`, the
  `threadThresholds` loop). Fewer channels leave NICs idle and lower the GPU-side ceiling (a per-channel
  rate x the channels), so the link time is simulated with the channels NCCL really runs. NCCL's count
  is a floor, so what each channel moves jumps as a channel is added; the bytes are charged as shared over
  the exact count (`smooth_channels`), and a larger buffer never comes out cheaper.
* **A tree's pipeline.** A tree moves each channel's share in chunks (NCCL picks the chunk per size and
  tree depth: `enqueue.cc`'s `tree.depth` rules for Simple, `nstepsLL128` for LL128). A chunk is forwarded
  hop by hop, up the chain inside a server and the binary tree across servers (a server takes its two
  children's chunks in through the channel's NIC, and sends down to both through it), then down again. With k
  chunks through stages of times t_1..t_H the time is sum(t_i) + (k - 1) max(t_i): the steady state pays
  k x max(t_i) (the link time), the pipeline's fill and drain add sum(t_i) - max(t_i), which grows with
  the tree's depth and with the chunk, and matters where a channel's share is a few chunks (128 KB - 32 MB
  at 32-128 GPUs). A ring's steps already move one rank's share each in turn: its link time includes them.

LL forwards 8-byte words with their flags line by line inside a server (a GPU reads its peer's lines as
their flags appear), so there its pipeline unit is one line per thread (`NCCL_LL_MAX_NTHREADS` x 8 data
bytes). Across the network it is store and forward: NCCL's proxy sends an LL step only once every line
of the step carries its flag (v2.7.8 `src/transport/net.cc`, sendProxy: `ready = 0` at the first line
whose flag1/flag2 is not the step's), and a tree LL step is the channel's whole chunk (`all_reduce.h`,
tree LL: `stepLines` x 8 B = 32 KB, or the channel's share rounded to threads x 8 B when smaller). So
every network hop holds the chunk back until the GPU has written all of it (LL's per-byte cost, the
model's `protocols.LL.per_byte_s`) and then moves it over the NIC; the receiving GPU starts after the
last byte lands. That cost is paid once per network hop, up and down, and grows with the tree's depth,
where a steady-state bandwidth sees none of it (16-64 KB on 32+ GPUs).

Simple fills its pipeline too: a chunk (an eighth of the buffer, NCCL_BUFFSIZE: 512 KiB by default,
1 MiB on A3 Mega's TCPXO; no halving from 2.20) climbs the chain hop by hop at the channel's share of each
link. NCCL's own tree/Simple hop latency prices "a 256kB chunk" (v2.9.9 `src/graph/tuning.cc`), but a
fitted latency is fitted on rows of a few KiB, where the fill is nothing; from there the fill grows with
the channel's share of the buffer up to a chunk, then stays. A3 Mega's 16-GPU all-reduce (tree/Simple,
forced) shows both: 51 us per MiB from 1 to 16 MiB, where the share grows to the 1 MiB chunk, and 5.6 us per
MiB above (16 MiB 978 us, 32 MiB 1060 us).

Try it: `python -c "from fabriclab.fabric.presets import cluster_preset as c;
from fabriclab.nccl.pipeline import tree_fill_s; print(tree_fill_s(c('a100-hdr'), 128, 'LL128', [1 << 20]))"`.
"""

from __future__ import annotations

import math

import numpy as np

from fabriclab.fabric.cluster import ClusterModel, ProtocolSpec
from fabriclab.fabric.nccl_env import simple_buffer_bytes
from fabriclab.nccl.choice import tuned
from fabriclab.nccl.layout import layout
from fabriclab.nccl.library import ll_write_s_per_byte, nccl_own, protocol_spec
from fabriclab.nccl.versions import channels_used, max_threads, thread_threshold, tree_chunk_bytes, table_of

# LL's unit of forwarding: every thread of a channel moves one 16-byte line (8 data bytes + flags) at a
# time (NCCL `src/include/device.h` NCCL_LL_MAX_NTHREADS 512, `union ncclLLFifoLine` of 16 bytes).
_LL_UNIT_BYTES = 512 * 8


def active_channels(cluster: ClusterModel, num_gpus: int, algorithm: str, protocol: str, sizes_bytes,
                    collective: str | None = None) -> np.ndarray:
    """Channels NCCL runs at each size (all of them for a library that is not NCCL). Where the cluster's
    tuner plugin picks this pair for `collective` with a channel count, that count (at most the library's)."""
    lib = cluster.library
    size = np.asarray(sizes_bytes, dtype=np.float64)
    if lib.selection != "nccl":
        return np.full(size.shape, lib.num_channels, dtype=int)
    table = table_of(lib.nccl_version)
    counted = "ring" if algorithm == "pat" else algorithm  # PAT's channels are costed as its ring's
    out = np.asarray(channels_used(table, counted, protocol, size, lib.num_channels, num_gpus), dtype=int)
    if lib.tuner and collective is not None:
        nodes = layout(cluster, num_gpus).num_servers
        for i, s in enumerate(size):
            rule = tuned(cluster, num_gpus, nodes, collective, int(s))
            if rule is not None and rule.channels and (rule.algorithm, rule.protocol) == (algorithm, protocol):
                out[i] = min(rule.channels, lib.num_channels)
    return out


def smooth_channels(cluster: ClusterModel, num_gpus: int, algorithm: str, protocol: str, sizes_bytes,
                    channels: np.ndarray) -> np.ndarray:
    """The channels the bytes are shared over at each size, for what a channel moves (its link share, its
    ceiling, its pipeline unit): `channels` (those NCCL runs, `active_channels`), except where NCCL drops
    channels, read there as size / (threads x threshold), the count at which every thread keeps exactly its
    threshold of bytes. NCCL's count is the floor of that, so the bytes a channel moves jump between one and
    two thresholds per thread as each channel is added, and a cost charged on the whole count falls as the
    size grows (LL128 8 -> 16 KB: 1 channel moves 8 KB, 3 move 5.3 KB each; on one NIC each, the 16 KB
    call came out faster). At those sizes each thread moves a line or two per step and the step latency
    decides, not the channel's rate: the smooth count keeps the charge from falling without pricing
    anything else (sizes of whole thresholds, every power of two for Simple and LL, are charged as before)."""
    lib = cluster.library
    size = np.asarray(sizes_bytes, dtype=np.float64)
    channels = np.asarray(channels, dtype=np.float64)
    if lib.selection != "nccl":
        return channels
    table = table_of(lib.nccl_version)
    counted = "ring" if algorithm == "pat" else algorithm
    per_channel = max_threads(table, counted, protocol) * thread_threshold(table, counted, protocol, num_gpus)
    if per_channel == 0:  # PAT: never reduced
        return channels
    own = np.asarray(channels_used(table, counted, protocol, size, lib.num_channels, num_gpus), dtype=np.float64)
    smooth = np.clip(size / per_channel, 1.0, lib.num_channels)
    return np.where(channels == own, np.maximum(channels, smooth), channels)  # a tuner's count stands


def _hop_rates(cluster: ClusterModel, protocol: str, channels: np.ndarray,
               spec: ProtocolSpec | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(intra-server, network) rate of one channel on one hop, bytes/s: its share of the GPU's internal link
    (every channel's chain passes every GPU) and of the NICs (channels spread over them, at most one NIC
    each), times the protocol's wire share (`spec`, `library.protocol_spec`; the cluster's own when None),
    at most the protocol's per-channel ceiling. LL's ceiling where nothing was fitted is NCCL's busBw of a
    whole collective (across servers its CPU row, llMaxBws N2 / N4), not a hop's: a hop pays LL's wire
    share and the GPU's write of the step (`tree_fill_s`)."""
    server, lib = cluster.server, cluster.library
    spec = spec or lib.protocols[protocol]
    intra = server.intra_bandwidth_Bps if server.intra == "nvswitch" else server.pcie_bandwidth_Bps
    nic = server.nic_bandwidth_Bps * server.nic_efficiency
    intra_ch = intra / channels * spec.link_factor
    net_ch = nic * np.minimum(1.0, server.nics_per_server / channels) * spec.link_factor
    if spec.busbw_cap_Bps is not None and not (protocol == "LL" and nccl_own(cluster)):
        cap = spec.busbw_cap_Bps / lib.num_channels
        intra_ch, net_ch = np.minimum(intra_ch, cap), np.minimum(net_ch, cap)
    return intra_ch, net_ch


def tree_fill_s(cluster: ClusterModel, num_gpus: int, protocol: str, sizes_bytes) -> np.ndarray:
    """Seconds a tree allreduce's pipeline adds to its steady state at each size: sum(t_i) - max(t_i) over
    the up and down hops of one chunk (module doc); zero on one server and for a library that is not NCCL."""
    size = np.asarray(sizes_bytes, dtype=np.float64)
    lay = layout(cluster, num_gpus)
    lib = cluster.library
    if lay.num_servers == 1 or lib.selection != "nccl":
        return np.zeros(size.shape)
    table = table_of(lib.nccl_version)
    channels = active_channels(cluster, num_gpus, "tree", protocol, size, "allreduce")
    net_hops = int(math.log2(lay.num_servers))
    intra_hops = lay.per_server - 1
    depth = intra_hops + net_hops
    buffer = simple_buffer_bytes(lib.nccl_env)
    chunk = np.asarray(tree_chunk_bytes(table, protocol, size, channels, lay.num_servers, num_gpus, depth, buffer),
                       dtype=np.float64)
    shared = smooth_channels(cluster, num_gpus, "tree", protocol, size, channels)
    unit = np.minimum(size / shared, chunk)
    spec = protocol_spec(cluster, "tree", protocol, num_gpus, lay.num_servers, "allreduce")
    intra_ch, net_ch = _hop_rates(cluster, protocol, shared, spec)
    # a binary tree's node takes its two children's chunks in through its channel's NIC and sends the result
    # down to both through it (a tree of 2 servers has one child)
    children = min(2, lay.num_servers - 1)
    if protocol == "LL":  # lines inside the server; the whole step, written first, across the network
        t_intra = np.minimum(unit, _LL_UNIT_BYTES) / intra_ch
        t_net = children * unit / net_ch + unit * ll_write_s_per_byte(cluster)
    else:
        t_intra, t_net = unit / intra_ch, children * unit / net_ch
    slowest = np.maximum(t_intra if intra_hops else 0.0, t_net)
    return 2 * intra_hops * t_intra + 2 * net_hops * t_net - slowest
