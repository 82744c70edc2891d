"""NCCL's tuning constants per release, as data: what `ncclTopoTuneModel` and `ncclTopoGetAlgoTime`
(`src/graph/tuning.cc`) and `getAlgoInfo`/`topoGetAlgoInfo` (`src/enqueue.cc`) use, from 2.9 to 2.30.

Each `TuningTable` was read from the release tag it names (`release`) of github.com/NVIDIA/nccl and holds
for every release from `since` up to the next table (the tags in between did not change what it holds):
baseLat and hwLat (us), the per-channel bandwidth ceilings per GPU generation and node-count index
(N1 / N2 / N4+, GB/s), the protocol and algorithm factors, the tree correction, the ring "plateau", the
rules that changed shape (nInterSteps, NVLS bandwidth, ...), and the launch constants (threads, thread
thresholds, buffers) from `src/include/device.h` (`devcomm.h` before 2.19), `comm.h` and `init.cc`,
which did not change from 2.9 to 2.30. `nccl/choice.py` turns a table into NCCL's estimate per size.

`tuning_for(version)` gives the table of a release (a ValueError before 2.9; past NEWEST_NCCL_VERSION the
newest, with `newer_than_modelled` for a caller's note). `table_of(library.nccl_version)` is what a cluster
runs: the same, except the legacy name 2.9.9 of files written before versions were recorded, which keeps
LEGACY_TABLE, the model fabriclab ran until now (NCCL 2.7.8's constants, not 2.9.9's).

Try it: `python -c "from fabriclab.nccl.versions import tuning_for, parse_nccl_version as p;
t = tuning_for(p('NCCL version 2.18.3+cuda12.2')); print(t.release, t.hw_lat_us['net']['ring'])"`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from fabriclab.fabric.cluster import LEGACY_NCCL_VERSION

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")  # NCCL's order
PROTOCOLS = ("LL", "LL128", "Simple")
ARCHS = ("volta", "ampere", "hopper", "blackwell")
Row = tuple[float, float, float]  # LL, LL128, Simple -- or N1, N2, N4 for the bandwidth ceilings


@dataclass(frozen=True, kw_only=True)
class TuningTable:
    """NCCL's tuning model of one range of releases (us, GB/s; GB = 1e9 B)."""

    release: str
    """Tag the numbers were read from (v<release>-1)."""
    since: str
    """First release with these constants; the table holds up to the next table's `since`."""
    algorithms: tuple[str, ...]
    """Algorithms the release has, in NCCL's order (2.9-2.13's single CollNet is `collnet_direct`)."""
    base_lat_us: dict[str, Row]
    """baseLat per algorithm: LL, LL128, Simple."""
    hw_lat_us: dict[str, dict[str, Row]]
    """hwLat per hardware (nvlink, pci, net) and algorithm."""
    arch_ccs: dict[str, int]
    """Compute capability that selects each row of the per-generation tables."""
    arch_exact: bool
    """The GPUs' capability must equal the row's (before 2.17: `minCompCap == 80 && maxCompCap == 80`);
    else the newest row at or below it."""
    ll_max_bw: dict[str, Row]
    """llMaxBws: one server by GPU row; several by CPU (Intel: row volta, AMD: row ampere)."""
    ring_ll128_max_bw: dict[str, Row]
    """Per-channel ring LL128 ceiling (ll128MaxBwPerCh, perChMaxRingLL128Bws)."""
    tree_ll128_max_bw: dict[str, Row]
    """Per-channel tree LL128 ceiling (perChMaxTreeLL128Bws)."""
    ll128_max_bw_per_collective: dict[str, float] | None = None
    """2.9 only: the LL128 ceiling per collective instead (broadcast, reduce, allgather, ...)."""
    tree_max_bw: dict[str, Row]
    """Per-channel tree ceiling (perChMaxTreeBws)."""
    nvls_tree_max_bw: dict[str, Row] | None = None
    """Per-channel NVLS tree ceiling (perChMaxNVLSTreeBws, 2.28+)."""
    nvls_efficiency: dict[str, float] | None = None
    """nvlsEfficiency (2.28+)."""
    busbw_cap: dict[str, float] = field(default_factory=dict)
    """busBw ceiling per GPU row (235 on Ampere up to 2.17, 370 on Hopper in 2.17)."""
    ring_ll_factor: float | None = None
    """Ring LL busBw factor; None: 1/4 across servers or for allreduce/reduce, else 1/3 (up to 2.20)."""
    ring_ll128_factor: float = 0.92
    """Ring LL128 busBw factor ("120/128")."""
    ring_ll128_ppn1_factor: float | None = 0.7
    """Ring LL128 factor below 2 GPUs per server (up to 2.22); None: none."""
    tree_factor: float = 0.92
    """Tree busBw factor."""
    tree_ll_factor: float = 1 / 3.8
    """Tree LL busBw factor."""
    tree_ll128_factor: tuple[float, float] = (7 / 9, 0.915)
    """Tree LL128 factor on one server and across servers (120/128 from 2.10)."""
    tree_pattern_factor: float | None = None
    """Factor when the tree graph has pattern TREE (one GPU per server), 2.18.3+."""
    pat_factor: float | None = None
    """PAT busBw factor (2.23: 0.85, 2.24+: 0.75); None: no PAT."""
    pat_latency_us: tuple[float, float, float] = (8.0, 3.5, 2.8)
    """PAT latency: a + log2(servers) x network latency / b + ranks x c, on top of baseLat (8 us from 2.28,
    a literal 8 before)."""
    collnet_factor: float | None = None
    """2.9: CollNet busBw x 0.9."""
    collnet_chain_factor: float | None = None
    """CollNet chain busBw factor (0.75, 2.14-2.17)."""
    collnet_direct_sm90_factor: float | None = None
    """CollNet direct factor on compute capability 9.0+ (0.85, 2.18.1+)."""
    collnet_arity_us: float | None = None
    """CollNet direct per-GPU serialisation latency (0.5, 0.4 from 2.19); None: 2.9's formula."""
    collnet_chain_net_latency: bool = False
    """CollNet chain latency adds the network latency (2.18.1+)."""
    collnet_ag_rs: str | None = None
    """CollNet direct for allgather/reduce_scatter: "interpolated" (2.20-2.26), "min" (2.27+)."""
    nvls_bandwidth: str | None = None
    """NVLS bandwidth rule: "ring-graph" (2.17), "graph" (2.18), "min" (2.19-2.26), "min-ppn" (2.27),
    "efficiency" (2.28+); None: no NVLS."""
    nvls_ratio: float | None = None
    """NVLS busBw -> algBw; None: nRanks / nsteps (2.28+)."""
    nvls_tree_ratio: float | str | None = None
    """NVLS tree ratio; "nodes": 0.70 x nNodes / (2 (nNodes - 1)) (2.18); None: nRanks / nsteps."""
    nvls_latency: str | None = None
    """NVLS latency rule: "base" (2.17), "net-steps" (2.18), "intra+net" (2.19+)."""
    nvls_collectives: tuple[str, ...] = ()
    """Collectives NVLS runs."""
    nvls_multinode: bool = True
    """NVLS across servers (allreduce with CollNet, NVLS tree without; not in 2.17)."""
    nvls_ag_rs_multinode: bool = False
    """NVLS allgather/reduce_scatter across servers (with CollNet, 2.27+)."""
    nvls_min_gpus: int = 3
    """GPUs per server NVLS needs (2.17: 2, 2.18-2.28: more than 2, 2.29+: 2)."""
    nvls_channels: dict[str, int] = field(default_factory=lambda: {"one": 16, "several": 16})
    """Channels an NVLS kernel runs (NVLS_NCHANNELS 16; Blackwell 24 / 32 from 2.27)."""
    ll_intra_factor: float | None = 1.8
    """LL intra-server latency factor across servers (up to 2.17)."""
    net_overhead_us: float | None = None
    """Ring intra-step floor across servers (getNetOverhead, Intel/other CPUs, 2.18.1+), x3 for Simple."""
    ring_inter_steps_offset: int = 1
    """Allreduce nInterSteps = 2 (nNodes - offset): 1 in 2.9-2.11 and 2.23+, 0 in 2.12-2.22."""
    ppn1_tree_net_latency: bool = False
    """One GPU per server: every algorithm takes the tree's network latency (2.23+)."""
    plateau_threshold: str = "ranks"
    """Ring Simple plateau from nBytes >= nRanks/16 x 64 KiB ("ranks") or
    nBytes / (nChannels x nRanks) >= 64 ("channels", 2.18.1+)."""
    plateau_factors: tuple[tuple[int, float], ...] = ((0, 1.9),)
    """(compute capability from, factor) of the plateau, the last that applies wins."""
    tree_correction: dict[str, tuple[float, ...]]
    """treeCorrectionFactor per protocol, powers of two from 64 B."""
    log2_zero_is_minus_one: bool = False
    """log2i(0) = -1 (2.22+): no tree correction below 64 B."""
    nvls_tree_correction_cc: int | None = None
    """NVLS tree takes the tree correction from this compute capability (x86 hosts, 2.29+)."""
    ll128_ccs: tuple[int, ...] | None = (70, 80)
    """Compute capabilities LL128 is on by default (with NVLink); None: any from 7.0 (2.27+)."""
    ag_rs_no_ratio: tuple[str, ...] = ()
    """Algorithms whose allgather/reduce_scatter bandwidth is used without the busBw -> algBw ratio."""
    nccl_steps: int = 8
    """NCCL_STEPS."""
    max_threads: dict[str, int] = field(default_factory=lambda: {"LL": 512, "LL128": 640, "Simple": 512})
    """NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS."""
    max_threads_nvls_collnet: int = 512
    """Threads of NVLS/CollNet Simple (NCCL_SIMPLE_MAX_NTHREADS; NCCL_MAX_NTHREADS = 640 from 2.18)."""
    thread_threshold: dict[str, int] = field(default_factory=lambda: {"LL": 8, "LL128": 8, "Simple": 64})
    """NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD (ring LL x nRanks; CollNet Simple 512)."""
    buff_sizes: dict[str, int] = field(default_factory=lambda: {
        "LL": 8 * 512 * 8 * 16, "LL128": 120 * 640 * 8 * 8, "Simple": 1 << 22})
    """DEFAULT_LL_BUFFSIZE (lines x threads x steps x 16 B), DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE."""
    tree_simple_chunk_halving: bool = True
    """Tree Simple halves its chunk against depth x 8 / x 4 / x 1 (up to 2.19)."""
    ll128_chunk_in_data: bool = False
    """LL128 chunk rules count data bytes (2.20+); before, 128-byte lines."""

    def arch(self, cc: int | None) -> str:
        """The per-generation row for compute capability `cc` (None: row volta, NCCL's default)."""
        if cc is None:
            return "volta"
        if self.arch_exact:
            return next((a for a, c in self.arch_ccs.items() if c == cc), "volta")
        return max(((c, a) for a, c in self.arch_ccs.items() if c <= cc), default=(0, "volta"))[1]


def _hw(nvlink: dict, pci: dict, net: dict) -> dict[str, dict[str, Row]]:
    return {"nvlink": nvlink, "pci": pci, "net": net}


_CORR_29 = {  # v2.9.9-1 src/graph/tuning.cc treeCorrectionFactor
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, .92, .92),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9)}
_CORR_210 = {**_CORR_29,  # v2.10.3-1: the LL128 row
             "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
                       1.0, 1.0)}
_VA = ("volta", "ampere")
_V29 = TuningTable(  # v2.9.9-1 src/graph/tuning.cc (unchanged from v2.9.6-1)
    release="2.9.9", since="2.9.0", algorithms=("tree", "ring", "collnet_direct"),
    base_lat_us={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4), "collnet_direct": (4.4, 4.4, 0.0)},
    hw_lat_us=_hw({"tree": (.52, 1.25, 28), "ring": (.47, 1.9, 3.4), "collnet_direct": (.5, 1.2, 4.0)},
                  {"tree": (1.0, 1.9, 28), "ring": (1.0, 2.5, 5.7), "collnet_direct": (1.0, 1.9, 5.5)},
                  {"tree": (5.0, 8.5, 28), "ring": (2.7, 4.0, 9.6), "collnet_direct": (5.0, 5.0, 10.7)}),
    arch_ccs={"ampere": 80}, arch_exact=True,
    ll_max_bw={"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0)},
    ring_ll128_max_bw={}, tree_ll128_max_bw={},
    ll128_max_bw_per_collective={"broadcast": 18.8, "reduce": 12.0, "allgather": 18.3, "reduce_scatter": 15.2,
                                 "allreduce": 16.9},
    tree_max_bw={"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 22.5, 16.0)},
    busbw_cap={"ampere": 235.0}, collnet_factor=0.9, tree_correction=_CORR_29)
_V210 = replace(  # v2.10.3-1 (v2.11.4-1 identical): CollNet latency, one LL128 ceiling, Ampere tree, 120/128
    _V29, release="2.10.3", since="2.10.3",
    hw_lat_us=_hw({**_V29.hw_lat_us["nvlink"], "collnet_direct": (.5, 1.2, 8.0)},
                  {**_V29.hw_lat_us["pci"], "collnet_direct": (1.0, 1.9, 8.0)}, _V29.hw_lat_us["net"]),
    ll128_max_bw_per_collective=None, ring_ll128_max_bw={a: (20.0,) * 3 for a in _VA},
    tree_ll128_max_bw={a: (20.0,) * 3 for a in _VA}, tree_ll128_factor=(7 / 9, 120 / 128), collnet_factor=None,
    collnet_arity_us=0.5, tree_max_bw={"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8)},
    tree_correction=_CORR_210)
_V212 = replace(  # v2.12.7-1 (to v2.13.4-1): ring NET Simple 28 us, allreduce nInterSteps 2 x nNodes
    _V210, release="2.12.12", since="2.12.7", ring_inter_steps_offset=0,
    hw_lat_us=_hw(_V210.hw_lat_us["nvlink"], _V210.hw_lat_us["pci"],
                  {**_V210.hw_lat_us["net"], "ring": (2.7, 4.0, 28)}))
_CN = {"collnet_direct": (0, 0, 8.0), "collnet_chain": (0, 0, 8.0)}
_V214 = replace(  # v2.14.3-1: CollNet direct + chain, ring NET Simple back to 9.6, LL128 on sm90
    _V212, release="2.14.3", since="2.14.3", algorithms=("tree", "ring", "collnet_direct", "collnet_chain"),
    base_lat_us={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4), "collnet_direct": (4.4, 4.4, 0.0),
                 "collnet_chain": (4.4, 4.4, 0.0)},
    hw_lat_us=_hw({"tree": (.52, 1.25, 28), "ring": (.47, 1.9, 3.4), **_CN},
                  {"tree": (1.0, 1.9, 28), "ring": (1.0, 2.5, 5.7), **_CN},
                  {"tree": (5.0, 8.5, 28), "ring": (2.7, 4.0, 9.6), "collnet_direct": (0, 0, 10.7),
                   "collnet_chain": (0, 0, 10.7)}),
    collnet_chain_factor=0.75, ll128_ccs=(70, 80, 90))
_VAH = ("volta", "ampere", "hopper")
_V215 = replace(  # v2.15.1-1 (to v2.16.5-1): a Hopper row (= Ampere's)
    _V214, release="2.15.5", since="2.15.1", arch_ccs={"ampere": 80, "hopper": 90},
    ll_max_bw={**_V214.ll_max_bw, "hopper": (87.7, 22.5, 19.0)},
    ring_ll128_max_bw={a: (20.0,) * 3 for a in _VAH}, tree_ll128_max_bw={a: (20.0,) * 3 for a in _VAH},
    tree_max_bw={**_V214.tree_max_bw, "hopper": (24.0, 23.6, 17.8)})
_NV0 = {"nvls": (0, 0, 0)}
_V217 = replace(  # v2.17.1-1: NVLS (one server), Hopper ceilings, 370 GB/s cap, plateau 1.5 on sm90
    _V215, release="2.17.1", since="2.17.1", arch_exact=False,
    algorithms=("tree", "ring", "collnet_direct", "collnet_chain", "nvls"),
    base_lat_us={**_V215.base_lat_us, "nvls": (0, 0, 40.0)},
    hw_lat_us={hw: {**row, **_NV0} for hw, row in _V215.hw_lat_us.items()},
    ring_ll128_max_bw={**_V215.ring_ll128_max_bw, "hopper": (36.7,) * 3},
    tree_ll128_max_bw={**_V215.tree_ll128_max_bw, "hopper": (36.7,) * 3},
    tree_max_bw={**_V215.tree_max_bw, "hopper": (38.7, 41.4, 33.0)},
    busbw_cap={"ampere": 235.0, "hopper": 370.0}, plateau_factors=((0, 1.9), (90, 1.5)),
    nvls_bandwidth="ring-graph", nvls_ratio=0.75, nvls_latency="base",
    nvls_collectives=("allreduce", "reduce_scatter", "allgather"), nvls_min_gpus=2, nvls_multinode=False)
_ALL6 = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree")
_V218_1 = replace(  # v2.18.1-1: new latencies, NVLS tree, net overhead, no busBw caps, plateau per channel
    _V217, release="2.18.1", since="2.18.1", algorithms=_ALL6,
    base_lat_us={"tree": (6.8, 14.0, 0), "ring": (6.6, 14.0, 8.4), "collnet_direct": (6.8, 14.0, 0),
                 "collnet_chain": (6.8, 14.0, 0), "nvls": (0, 0, 23.0), "nvls_tree": (0, 0, 23.0)},
    hw_lat_us=_hw({"tree": (.6, 1.25, 28), "ring": (.6, 1.9, 3.4), "collnet_direct": (0, 0, 8.0),
                   "collnet_chain": (0, 0, 4.75), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
                  {"tree": (1.0, 1.9, 28), "ring": (1.0, 2.5, 5.7), **_CN, "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
                  {"tree": (5.0, 8.5, 28), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0, 0, 10.7),
                   "collnet_chain": (0, 0, 14), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 19)}),
    busbw_cap={}, collnet_chain_factor=None, collnet_direct_sm90_factor=0.85, collnet_chain_net_latency=True,
    ll_intra_factor=None,
    net_overhead_us=1.0, plateau_threshold="channels", plateau_factors=((0, 1.9), (80, 1.4)),
    nvls_bandwidth="graph", nvls_tree_ratio="nodes", nvls_latency="net-steps", nvls_collectives=("allreduce",),
    nvls_min_gpus=3, nvls_multinode=True, max_threads_nvls_collnet=640)
_V218 = replace(  # v2.18.3-1 (to v2.18.6-1): tree Simple hwLat 4/6/14, LL128 ceilings per N, tree pattern 0.85
    _V218_1, release="2.18.3", since="2.18.3",
    hw_lat_us=_hw({**_V218_1.hw_lat_us["nvlink"], "tree": (.6, 1.25, 4)},
                  {**_V218_1.hw_lat_us["pci"], "tree": (1.0, 1.9, 6)},
                  {**_V218_1.hw_lat_us["net"], "tree": (5.0, 8.5, 14)}),
    tree_ll128_max_bw={**_V218_1.tree_ll128_max_bw, "hopper": (36.7, 36.7, 29.0)},
    tree_max_bw={**_V218_1.tree_max_bw, "hopper": (38.7, 41.4, 36.0)}, tree_pattern_factor=0.85,
    nvls_ratio=5 / 6)
_V219 = replace(  # v2.19.1-1 (to v2.19.4-1): CollNet/NVLS latencies, NVLS min(bwIntra, bwInter), NVLS AG/RS
    _V218, release="2.19.4", since="2.19.1",
    base_lat_us={**_V218.base_lat_us, **{a: (0, 0, 0) for a in _ALL6[2:]}},
    hw_lat_us=_hw({"tree": (.6, 1.25, 28), "ring": (.6, 1.9, 3.4), "collnet_direct": (0, 0, 3.7),
                   "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 23), "nvls_tree": (0, 0, 23)},
                  {"tree": (1.0, 1.9, 28), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0, 0, 3.7),
                   "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
                  {"tree": (5.0, 8.5, 28), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0, 0, 31),
                   "collnet_chain": (0, 0, 30), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 14)}),
    collnet_arity_us=0.4, nvls_bandwidth="min", nvls_tree_ratio=5 / 6, nvls_latency="intra+net",
    nvls_collectives=("allreduce", "reduce_scatter", "allgather"))
_V220 = replace(  # v2.20.3-1 (to v2.20.5-1): CollNet direct AG/RS; tree Simple chunk rule gone (enqueue.cc)
    _V219, release="2.20.5", since="2.20.3", collnet_ag_rs="interpolated", ag_rs_no_ratio=("collnet_direct",),
    tree_simple_chunk_halving=False, ll128_chunk_in_data=True)
_V221 = replace(  # v2.21.5-1: ring LL x 0.5, Hopper LL ceiling, NVLS NVLink 25 us
    _V220, release="2.21.5", since="2.21.5", ring_ll_factor=0.5,
    ll_max_bw={**_V220.ll_max_bw, "hopper": (141.0, 45.0, 35.0)},
    hw_lat_us={**_V220.hw_lat_us, "nvlink": {**_V220.hw_lat_us["nvlink"], "nvls": (0, 0, 25),
                                              "nvls_tree": (0, 0, 25)}})
_V222 = replace(_V221, release="2.22.3", since="2.22.3", log2_zero_is_minus_one=True)  # utils.h log2i = log2Down
_V223 = replace(  # v2.23.4-1: PAT, tree Simple 8.4 / 4 / 14 us, ring LL128 0.92 always, nInterSteps 2(n-1)
    _V222, release="2.23.4", since="2.23.4", algorithms=ALGORITHMS, pat_factor=0.85,
    base_lat_us={**_V222.base_lat_us, "tree": (6.8, 14.0, 8.4), "pat": (0, 0, 0)},
    hw_lat_us=_hw({**_V222.hw_lat_us["nvlink"], "tree": (.6, 1.25, 4.0), "pat": (0, 0, 0)},
                  {**_V222.hw_lat_us["pci"], "tree": (1.0, 1.9, 4.0), "pat": (0, 0, 0)},
                  {**_V222.hw_lat_us["net"], "tree": (5.0, 8.5, 14), "pat": (0, 0, 0)}),
    ring_ll128_ppn1_factor=None, ring_inter_steps_offset=1, ppn1_tree_net_latency=True,
    ag_rs_no_ratio=tuple(a for a in ALGORITHMS if a != "ring"))
_V224 = replace(_V223, release="2.24.3", since="2.24.3", pat_factor=0.75)  # v2.24.3-1: PAT x 0.75
_VB = ("volta", "ampere", "hopper", "blackwell")
_V225 = replace(  # v2.25.1-1 (to v2.26.6-1): a Blackwell row (2 x Hopper), LL128 on sm100/sm120
    _V224, release="2.25.1", since="2.25.1", arch_ccs={"ampere": 80, "hopper": 90, "blackwell": 100},
    ll_max_bw={**_V224.ll_max_bw, "blackwell": (2 * 141.0, 2 * 45.0, 2 * 35.0)},
    ring_ll128_max_bw={**_V224.ring_ll128_max_bw, "blackwell": (2 * 36.7,) * 3},
    tree_ll128_max_bw={**_V224.tree_ll128_max_bw, "blackwell": (2 * 36.7, 2 * 36.7, 2 * 29.0)},
    tree_max_bw={**_V224.tree_max_bw, "blackwell": (2 * 38.7, 2 * 41.4, 2 * 36.0)}, ll128_ccs=(70, 80, 90, 100, 120))
_V227 = replace(  # v2.27.3-1 (to v2.27.7-1): NVLS AG/RS bandwidth and across servers, LL128 on any sm70+
    _V225, release="2.27.7", since="2.27.3", nvls_bandwidth="min-ppn", collnet_ag_rs="min",
    nvls_ag_rs_multinode=True, ll128_ccs=None, nvls_channels={"one": 16, "several": 16, "blackwell-one": 24,
                                                             "blackwell-several": 32})
_V228 = replace(  # v2.28.3-1: tuner constants, NVLS efficiency, NVLS tree ceiling, Blackwell tree rows
    _V227, release="2.28.3", since="2.28.3", base_lat_us={**_V227.base_lat_us, "pat": (8.0, 8.0, 8.0)},
    pat_latency_us=(0.0, 3.5, 2.8),
    hw_lat_us=_hw({**_V227.hw_lat_us["nvlink"], "pat": (0, 0, 4.0)}, {**_V227.hw_lat_us["pci"], "pat": (0, 0, 4.0)},
                  {**_V227.hw_lat_us["net"], "pat": (0, 0, 14)}),
    tree_ll128_max_bw={**_V227.tree_ll128_max_bw, "blackwell": (55.6, 31.67, 20.0)},
    tree_max_bw={**_V227.tree_max_bw, "blackwell": (70.0, 42.8, 24.0)},
    nvls_tree_max_bw={"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (0.0, 57.7, 45.5),
                      "blackwell": (0.0, 96.0, 43.1)},
    nvls_efficiency={"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74},
    nvls_bandwidth="efficiency", nvls_ratio=None, nvls_tree_ratio=None)
_V228_7 = replace(_V228, release="2.28.7", since="2.28.7",  # v2.28.7-1: Blackwell ring LL128 N2
                  ring_ll128_max_bw={**_V228.ring_ll128_max_bw, "blackwell": (2 * 36.7, 34.6, 2 * 36.7)})
_V228_9 = replace(  # v2.28.9-1: NVLS tree network latency 20.9 us, Blackwell NVLS tree N4 43.8
    _V228_7, release="2.28.9", since="2.28.9",
    hw_lat_us={**_V228_7.hw_lat_us, "net": {**_V228_7.hw_lat_us["net"], "nvls_tree": (0, 0, 20.9)}},
    nvls_tree_max_bw={**_V228_7.nvls_tree_max_bw, "blackwell": (0.0, 96.0, 43.8)})
_CORR_229 = {p: row + (row[-1],) for p, row in _CORR_210.items()}  # v2.29.2-1: 24 entries (to 512 MB)
_V229 = replace(  # v2.29.2-1 (to v2.29.3-1): Blackwell ring LL128, NVLS tree correction on Blackwell, NVLS 2 GPUs
    _V228_9, release="2.29.2", since="2.29.2", tree_correction=_CORR_229, nvls_tree_correction_cc=100,
    ring_ll128_max_bw={**_V228_9.ring_ll128_max_bw, "blackwell": (34.5, 34.6, 34.5)}, nvls_min_gpus=2)
_V229_7 = replace(_V229, release="2.29.7", since="2.29.7",  # v2.29.7-1: Blackwell ring LL128 40
                  ring_ll128_max_bw={**_V229.ring_ll128_max_bw, "blackwell": (40.0, 40.0, 40.0)})
_V230 = replace(_V229_7, release="2.30.7", since="2.30.3",  # v2.30.3-1 (to v2.30.7-1): Blackwell NVLS tree N4 80
                nvls_tree_max_bw={**_V229_7.nvls_tree_max_bw, "blackwell": (0.0, 96.0, 80.0)})

# fabriclab's model before NCCL versions were recorded: v2.7.8-1 src/graph/tuning.cc (as from v2.7.3-1), which it
# ran under the name 2.9. What the fields cannot say, `choice.py` keeps beside it: trees x 0.9 at most 110 GB/s
# up to 2 servers and 80 beyond (LL128 on sm80: 130 / 105), tree LL128 at most 7/9 of the per-channel ceiling, no
# LL ceilings. Cluster files and presets that say `cluster.LEGACY_NCCL_VERSION` keep it (`table_of`).
_CORR_27 = {  # 64 B to 128 MB
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9)}
LEGACY_TABLE = replace(
    _V29, release="2.7.8", since="2.7.3",
    hw_lat_us=_hw({**_V29.hw_lat_us["nvlink"], "tree": (.52, 1.2, 28)}, _V29.hw_lat_us["pci"],
                  {**_V29.hw_lat_us["net"], "tree": (5.0, 8.5, 50)}),
    ll_max_bw={}, tree_max_bw={}, tree_factor=0.9, tree_correction=_CORR_27,
    ll128_max_bw_per_collective={**_V29.ll128_max_bw_per_collective, "allreduce": 16.7})

TABLES = (_V29, _V210, _V212, _V214, _V215, _V217, _V218_1, _V218, _V219, _V220, _V221, _V222, _V223, _V224,
          _V225, _V227, _V228, _V228_7, _V228_9, _V229, _V229_7, _V230)
SUPPORTED_VERSIONS = tuple(t.release for t in TABLES)
NEWEST_NCCL_VERSION = TABLES[-1].release
_ACCEPTED = ("'2.18.3', '2.18.3+cuda12.2', 'NCCL version 2.18.3+cuda12.2', 'v2.18.3-1', "
             "or nccl-tests' 'nccl-library=21803' / 'nccl-headers=21803'")


def compute_capability(gpu_name: str) -> int | None:
    """Compute capability x 10 from a GPU name as nccl-tests prints it ("NVIDIA H100 80GB HBM3" -> 90);
    None when the name says nothing known."""
    name = gpu_name.upper()
    for patterns, cc in ((("GB300", "B300"), 103), (("GB200", "B200", "B100"), 100),
                         (("RTX PRO 6000 BLACKWELL", r"RTX ?50\d\d"), 120),
                         (("H100", "H200", "H800", "H20", "GH200"), 90), (("L40S?", "L4", r"RTX ?40\d\d", "ADA"), 89),
                         (("A10G?", "A40", "A6000", "A5000", r"RTX ?30\d\d"), 86), (("A100", "A800", "A30"), 80),
                         (("T4", r"RTX ?20\d\d"), 75), (("V100", "TITAN V"), 70), (("P100",), 60)):
        if any(re.search(rf"(?<![A-Z0-9]){p}(?![0-9])", name) for p in patterns):
            return cc
    return None


def _key(version: str) -> tuple[int, int, int]:
    return tuple(int(x) for x in version.split("."))  # type: ignore[return-value]


def parse_nccl_version(text: str) -> str:
    """"2.18.3" from "2.18.3", "2.18.3+cuda12.2", "NCCL version 2.18.3+cuda12.2", "v2.18.3-1" or nccl-tests'
    "nccl-library=21803" (NCCL_VERSION_CODE = major x 10000 + minor x 100 + patch from 2.9)."""
    s = str(text).strip()
    code = re.fullmatch(r"(?:nccl-(?:library|headers)\s*=\s*)?(\d{5,6})", s)
    if code:
        n = int(code.group(1))
        if n >= 20900:
            return f"{n // 10000}.{n // 100 % 100}.{n % 100}"
        raise ValueError(f"NCCL version code {n}: codes major*10000+minor*100+patch start at 20900 (2.9.0); "
                         f"give the version as text, e.g. '2.18.3'")
    m = re.fullmatch(r"(?:NCCL version\s+)?v?(\d+)\.(\d+)\.(\d+)(?:-\d+)?(?:\+\S*)?", s, flags=re.IGNORECASE)
    if not m:
        raise ValueError(f"cannot read an NCCL version from {text!r}: give {_ACCEPTED}")
    return ".".join(str(int(g)) for g in m.groups())


def tuning_for(version: str) -> TuningTable:
    """The table of the newest modelled release at or before `version` ("2.18.3"). Older than 2.9: a
    ValueError. Newer than NEWEST_NCCL_VERSION: the newest table, returned as is -- callers compare
    `newer_than_modelled(version)` and print a note (NCCL's tuning may have moved on)."""
    key = _key(parse_nccl_version(version))
    if key < (2, 9, 0):
        raise ValueError(f"NCCL {version}: the tuning model is modelled from 2.9 on; use 2.9 or newer "
                         f"(NCCL 2.4's model of the published rows is nccl/nccl24.py)")
    return [t for t in TABLES if _key(t.since) <= key][-1]


def table_of(library_version: str) -> TuningTable:
    """The table a cluster's `library.nccl_version` runs: `tuning_for` it, except `cluster.LEGACY_NCCL_VERSION`
    (2.7.8: logs that do not say their version, files written before versions were recorded), which keeps fabriclab's earlier model,
    LEGACY_TABLE (NCCL 2.7.8's constants), so that no existing file's results move."""
    if parse_nccl_version(library_version) == LEGACY_NCCL_VERSION:
        return LEGACY_TABLE
    return tuning_for(library_version)


def newer_than_modelled(version: str) -> bool:
    """True when `version` is past NEWEST_NCCL_VERSION (tuning_for then gives the newest table)."""
    return _key(parse_nccl_version(version)) > _key(NEWEST_NCCL_VERSION)


def thread_threshold(table: TuningTable, algorithm: str, protocol: str, num_ranks: int) -> int:
    """comm->threadThresholds: the protocol's, x nRanks for ring LL, 512 for CollNet Simple."""
    if algorithm.startswith("collnet") and protocol == "Simple":
        return 512
    return table.thread_threshold[protocol] * (num_ranks if algorithm == "ring" and protocol == "LL" else 1)


def max_threads(table: TuningTable, algorithm: str, protocol: str, ring_bw_GBps: float | None = None) -> int:
    """comm->maxThreads: ring Simple 256 when ring bwIntra x nChannels <= PCI_BW (12 GB/s, topo.h);
    PAT 0 (never set: its channels are never reduced)."""
    if algorithm == "pat":
        return 0
    if protocol == "Simple" and (algorithm.startswith("collnet") or algorithm.startswith("nvls")):
        return table.max_threads_nvls_collnet
    if algorithm == "ring" and protocol == "Simple" and ring_bw_GBps is not None and ring_bw_GBps <= 12.0:
        return 256
    return table.max_threads[protocol]


def channels_used(table: TuningTable, algorithm: str, protocol: str, size_bytes, num_channels: int,
                  num_ranks: int, *, num_nodes: int = 1, cc: int | None = None, num_heads: int = 1,
                  ring_bw_GBps: float | None = None):
    """Channels NCCL runs for `size_bytes` (a number or an array): ring/tree drop one channel at a time
    while nBytes < nc x maxThreads x threadThreshold (getAlgoInfo, enqueue.cc); NVLS runs its own
    NVLS_NCHANNELS (across servers at most `num_channels` from 2.28); CollNet direct steps down past 16,
    8, 4, 2, 1 with `num_heads` NICs, halving the threshold at each step's 1.5x."""
    size = np.asarray(size_bytes, dtype=np.float64)
    if algorithm in ("nvls", "nvls_tree"):
        blackwell = cc is not None and cc >= 100 and "blackwell-one" in table.nvls_channels
        nc = table.nvls_channels[("blackwell-" if blackwell else "") + ("one" if num_nodes == 1 else "several")]
        if algorithm == "nvls" and num_nodes > 1 and table.nvls_bandwidth == "efficiency":
            nc = min(nc, num_channels)
        return _shaped(np.full(size.shape, nc), size_bytes)
    nt = max_threads(table, algorithm, protocol, ring_bw_GBps)
    threshold = thread_threshold(table, algorithm, protocol, num_ranks)
    if algorithm == "collnet_direct":
        return _shaped(np.array([_collnet_channels(s, num_channels, nt, threshold, num_heads)
                                 for s in size.ravel()]).reshape(size.shape), size_bytes)
    if nt == 0:
        return _shaped(np.full(size.shape, num_channels), size_bytes)
    nc = np.clip(np.floor(size / (nt * threshold)), 1, num_channels)
    return _shaped(nc.astype(np.int64), size_bytes)


# What NCCL 2.29 takes one channel to drive across the network (P2P_PER_CHANNEL_NET_BW, GB/s,
# v2.29.3 src/graph/paths.cc): the prior of a channel's point-to-point rate where a log shows one.
P2P_PER_CHANNEL_NET_GBPS = 14.0
_P2P_PER_BATCH = 8  # NCCL_MAX_DEV_WORK_P2P_PER_BATCH (v2.29.3 src/include/device.h)


def _pow2_up(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def p2p_net_channels(version: str, num_ranks: int, num_nodes: int, num_channels: int, nics_per_gpu: int,
                     nic_GBps: float) -> int:
    """Channels NCCL gives a point-to-point transfer to a peer on another server (p2pnChannelsPerPeer,
    `ncclTopoGetNchannels` / `ncclTopoComputeP2pChannels` in src/graph/paths.cc of each release), with
    `num_channels` the communicator's channels (p2pnChannels: the next power of 2):
    up to 2.11 one; 2.12-2.19 NCCL_NCHANNELS_PER_NET_PEER (2); 2.20-2.28 two, halved while 2 x ranks >
    4 x p2pnChannels, at least the GPU's NICs; from 2.29 the GPU's NICs or the channels it takes to drive
    their rate at 14 GB/s each, halved on several servers while channels x ceil(ranks / 8) > p2pnChannels.
    A ring shift over many servers (nccl-tests' sendrecv, a pipeline's stage hop in a large communicator)
    thus runs on one channel where two ranks get two or four."""
    key = _key(parse_nccl_version(version))
    p2p = _pow2_up(min(max(1, num_channels), 64))
    if key < (2, 12, 0):
        return 1
    if key < (2, 20, 0):
        return min(p2p, _pow2_up(min(p2p, 2)))
    if key < (2, 29, 0):
        most = 2
        while most * num_ranks > p2p * 4 and most > 1:
            most //= 2
        return min(p2p, _pow2_up(min(p2p, max(nics_per_gpu, most))))
    per_peer = _pow2_up(max(nics_per_gpu, math.ceil(nics_per_gpu * nic_GBps / P2P_PER_CHANNEL_NET_GBPS)))
    if num_nodes > 1:
        while per_peer * -(-num_ranks // _P2P_PER_BATCH) > p2p and per_peer > 1:
            per_peer //= 2
        return per_peer
    return min(p2p, per_peer)


def _collnet_channels(size: float, nc: int, nt: int, threshold: int, heads: int) -> int:
    switch, flag = 16, True
    while switch >= 1 and flag:
        while (flag := size < nc * nt * heads * threshold) and nc > switch:
            if nc == switch + switch // 2:
                threshold //= 2
            nc -= 1
        switch //= 2
    return nc


def _shaped(values: np.ndarray, like):
    return int(values) if np.ndim(like) == 0 else values.astype(np.int64)


def tree_depth(num_ranks: int, num_nodes: int) -> int:
    """channels[0].tree.depth: nRanks/nNodes - 1 + log2i(nNodes) (src/graph/connect.cc)."""
    return num_ranks // num_nodes - 1 + max(num_nodes, 1).bit_length() - 1


def tree_chunk_bytes(table: TuningTable, protocol: str, size_bytes, num_channels: int, num_nodes: int,
                     num_ranks: int, tree_depth: int, simple_buffer: int | None = None):
    """Data bytes a tree step moves (NCCL's chunkSize, enqueue.cc computeColl / calcCollChunking):
    Simple: stepSize = buffSize/NCCL_STEPS halved while nBytes/(nChannels x chunk) < depth x 8 (> 128 KiB),
    x 4 (> 64 KiB), x 1 (> 32 KiB), up to 2.19; LL: half its step (8 data bytes per 16-byte line);
    LL128: halved while below nstepsLL128 x 64/ppn (> 128 KiB) and x 16/ppn (> 32 KiB),
    nstepsLL128 = 1 + log2i(nNodes) + 0.1 ppn, then x 120/128 (counted in data bytes from 2.20).
    A channel's share smaller than the chunk moves in one step. `simple_buffer`: Simple's buffer when
    NCCL_BUFFSIZE sets it (it sets Simple's only; LL and LL128 keep theirs). `num_channels` may be an array
    of the channels at each size."""
    size = np.asarray(size_bytes, dtype=np.float64)
    buffer = simple_buffer if protocol == "Simple" and simple_buffer else table.buff_sizes[protocol]
    step = buffer // table.nccl_steps
    if protocol == "LL":
        return _shaped(np.full(size.shape, step // 2), size_bytes)
    chunk = np.full(size.shape, float(step))
    if protocol == "LL128":
        if table.ll128_chunk_in_data:
            chunk = chunk // 16 * 15
        ppn = num_ranks / num_nodes
        steps = 1 + (max(num_nodes, 1).bit_length() - 1) + 0.1 * ppn
        rules = ((steps * 64 / ppn, 131072), (steps * 16 / ppn, 32768))
    elif table.tree_simple_chunk_halving:
        rules = ((tree_depth * 8, 131072), (tree_depth * 4, 65536), (tree_depth, 32768))
    else:
        rules = ()
    for target, floor in rules:
        while True:
            shrink = (np.floor(size / (num_channels * chunk)) < target) & (chunk > floor)
            if not shrink.any():
                break
            chunk = np.where(shrink, chunk // 2, chunk)
    if protocol == "LL128" and not table.ll128_chunk_in_data:
        chunk = chunk // 16 * 15
    return _shaped(chunk, size_bytes)
