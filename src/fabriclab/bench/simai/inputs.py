"""SimAI's inputs for one collective on a cluster shape: its topology file and its one-layer workload.

The topology is the file SimAI's own generator writes (`inputs/gen_Topo_Template.py` of SimAI v1.6, kept in
../shared/tools/simai): `fat-tree` is its `DCN+` single-ToR layout (`No_Rail_Opti_SingleToR`: a server's
NICs fill a leaf of 16 in GPU order), `rail` its `Spectrum-X` layout (`Rail_Opti_SingleToR`: GPU k of each
server on rail leaf k, one leaf per rail for every 16 servers). Every leaf is linked once to every spine at
400 Gb/s and there are 16 / oversubscription spines, so a full DCN+ leaf is `oversubscription`:1 (a rail leaf
of fewer than 16 servers has fewer NICs below it than that). The text written here is the generator's, byte
for byte (tests/bench/test_simai.py checks it against the generator where it is), for

    python3 gen_Topo_Template.py -topo DCN+|Spectrum-X -g G -gps 8 -gt H100 -bw 400Gbps -nvbw 3388Gbps \
        -npa 16 -asn LEAVES -psn 16/oversubscription -apbw 400Gbps -app LEAVES

The file: a header `nodes gpus_per_server nvswitches switches links gpu_type`, the switch ids (NVSwitches,
then leaves, then spines, each followed by a space), then one link a line, `a b rate latency error_rate`:
each GPU to its server's NVSwitch and to its leaf, then every leaf to every spine.

The workload is SimAI's layer table (its README, "Inputs and outputs") with one layer whose weight-gradient
phase runs the collective over the data-parallel group, i.e. all GPUs at tensor parallelism 1. Sizes are
nccl-tests' (checked on SimAI's flows: an all-gather of S sends S x (n-1)/n per GPU, an all-to-all S/n to
each peer), as fabriclab's.

Try it: `python -c "from fabriclab.bench.simai.inputs import topology_text; print(topology_text(32, 'rail', 2)[:200])"`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.units import format_size

GPUS_PER_SERVER = 8  # HGX H100
NICS_PER_LEAF = 16  # -npa: a leaf's NIC ports
NIC_RATE = "400Gbps"  # -bw and -apbw: ConnectX-7 NDR / Spectrum-X 400 Gb/s
NVLINK_RATE = "3388Gbps"  # -nvbw: SimAI's H100 NVSwitch rate (its README's example), 423.5e9 B/s per GPU
NVLINK_LATENCY = "0.000025ms"  # the generator's defaults
NIC_LATENCY = "0.0005ms"
GPU_TYPE = "H100"
# SimAI's generator layout of each fabric
LAYOUTS = {"fat-tree": "DCN+", "rail": "Spectrum-X"}
# fabriclab's collective names (`nccl/predict.collective_times`) -> SimAI's workload names
COLLECTIVES = {"allreduce": "ALLREDUCE", "allgather": "ALLGATHER", "reduce_scatter": "REDUCESCATTER",
               "alltoall": "ALLTOALL"}
ALIASES = {"reducescatter": "reduce_scatter", "reduce-scatter": "reduce_scatter", "all-reduce": "allreduce",
           "all-gather": "allgather", "all-to-all": "alltoall"}
OVERSUBSCRIPTIONS = tuple(r for r in range(1, NICS_PER_LEAF + 1) if NICS_PER_LEAF % r == 0)  # whole spines
MAX_GPUS = 1024  # 64 DCN+ leaves; beyond, one ns-3 run takes hours and tens of GB


@dataclass(frozen=True, kw_only=True)
class SimaiCase:
    """One collective on one SimAI cluster shape."""

    num_gpus: int
    """GPUs, whole servers of 8."""
    fabric: str
    """`fat-tree` (SimAI's DCN+) or `rail` (its Spectrum-X)."""
    oversubscription: int
    """Leaf down:up ratio of a full leaf: 16 NICs over 16 / this many spines (1, 2, 4, 8 or 16)."""
    collective: str
    """fabriclab's name: allreduce, allgather, reduce_scatter or alltoall."""
    size_bytes: int
    """nccl-tests' size (the all-gather's output, the all-to-all's buffer per GPU)."""

    def __post_init__(self) -> None:
        check_shape(self.num_gpus, self.fabric, self.oversubscription)
        if self.collective not in COLLECTIVES:
            raise ValueError(f"collective {self.collective!r}: use one of {', '.join(COLLECTIVES)}")
        if not isinstance(self.size_bytes, int) or self.size_bytes < self.num_gpus or \
                self.size_bytes % self.num_gpus:
            raise ValueError(f"size {self.size_bytes!r} B: give a whole multiple of the {self.num_gpus} GPUs' "
                             f"count (every GPU's share whole bytes), e.g. 16MiB")

    @property
    def label(self) -> str:
        """`32 fat-tree 2:1 allreduce 16MB`."""
        return (f"{self.num_gpus} {self.fabric} {self.oversubscription}:1 {self.collective} "
                f"{format_size(self.size_bytes)}")


def collective_name(text: str) -> str:
    """fabriclab's name of a collective as a user writes it (`reducescatter`, `all-reduce`, ...)."""
    key = text.strip().lower()
    key = ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise ValueError(f"collective {text!r}: use allreduce, allgather, reducescatter or alltoall")
    return key


def check_shape(num_gpus: int, fabric: str, oversubscription: int) -> None:
    """A ValueError saying what to change when SimAI's generator cannot build the shape as fabriclab reads it."""
    if not isinstance(num_gpus, int) or num_gpus < 2 * GPUS_PER_SERVER or num_gpus % GPUS_PER_SERVER \
            or num_gpus > MAX_GPUS:
        raise ValueError(f"{num_gpus!r} GPUs: give whole servers of {GPUS_PER_SERVER}, at least 2 and at most "
                         f"{MAX_GPUS // GPUS_PER_SERVER} servers, e.g. 32 or 64")
    if fabric not in LAYOUTS:
        raise ValueError(f"fabric {fabric!r}: use fat-tree (SimAI's DCN+) or rail (its Spectrum-X)")
    if oversubscription not in OVERSUBSCRIPTIONS:
        raise ValueError(f"oversubscription {oversubscription!r}: give a leaf down:up ratio that leaves whole "
                         f"spines of the {NICS_PER_LEAF} a leaf's NICs need, one of "
                         f"{', '.join(map(str, OVERSUBSCRIPTIONS))}")


def num_leaves(num_gpus: int, fabric: str) -> int:
    """Leaves (SimAI's ASW) the generator makes: DCN+ one per 16 NICs, Spectrum-X 8 rails per 16 servers."""
    if fabric == "rail":
        per_segment = NICS_PER_LEAF * GPUS_PER_SERVER
        return GPUS_PER_SERVER * -(-num_gpus // per_segment)
    return -(-num_gpus // NICS_PER_LEAF)


def num_spines(oversubscription: int) -> int:
    """Spines (SimAI's PSW): a full leaf's 16 NICs over 16 / oversubscription up-links, one to each spine."""
    return NICS_PER_LEAF // oversubscription


def leaf_of(gpu: int, fabric: str) -> int:
    """The leaf (0-based, in the generator's order) that GPU `gpu`'s NIC is cabled to."""
    if fabric == "rail":
        segment = gpu // (NICS_PER_LEAF * GPUS_PER_SERVER)
        return segment * GPUS_PER_SERVER + gpu % GPUS_PER_SERVER
    return gpu // NICS_PER_LEAF


def topology_name(num_gpus: int, fabric: str) -> str:
    """The file name the generator gives the topology."""
    layout = "DCN+SingleToR" if fabric == "fat-tree" else "Spectrum-X"
    return f"{layout}_{num_gpus}g_{GPUS_PER_SERVER}gps_{NIC_RATE}_{GPU_TYPE}"


def generator_args(num_gpus: int, fabric: str, oversubscription: int) -> list[str]:
    """The arguments of SimAI's `gen_Topo_Template.py` that write the same file as `topology_text`."""
    check_shape(num_gpus, fabric, oversubscription)
    leaves = str(num_leaves(num_gpus, fabric))
    return ["-topo", LAYOUTS[fabric], "-g", str(num_gpus), "-gps", str(GPUS_PER_SERVER), "-gt", GPU_TYPE,
            "-bw", NIC_RATE, "-nvbw", NVLINK_RATE, "-npa", str(NICS_PER_LEAF), "-asn", leaves,
            "-psn", str(num_spines(oversubscription)), "-apbw", NIC_RATE, "-app", leaves]


def topology_text(num_gpus: int, fabric: str, oversubscription: int) -> str:
    """SimAI's topology file (module docstring), as its generator writes it."""
    check_shape(num_gpus, fabric, oversubscription)
    servers = num_gpus // GPUS_PER_SERVER
    leaves, spines = num_leaves(num_gpus, fabric), num_spines(oversubscription)
    nodes = num_gpus + servers + leaves + spines
    links = leaves * spines + 2 * num_gpus  # every leaf to every spine; each GPU to its NVSwitch and its leaf
    nvswitch = [num_gpus + s for s in range(servers)]
    leaf = [num_gpus + servers + k for k in range(leaves)]
    spine = [num_gpus + servers + leaves + k for k in range(spines)]
    lines = [f"{nodes} {GPUS_PER_SERVER} {servers} {leaves + spines} {links} {GPU_TYPE}",
             "".join(f"{i} " for i in range(num_gpus, nodes))]
    for gpu in range(num_gpus):
        lines.append(f"{gpu} {nvswitch[gpu // GPUS_PER_SERVER]} {NVLINK_RATE} {NVLINK_LATENCY} 0")
        lines.append(f"{gpu} {leaf[leaf_of(gpu, fabric)]} {NIC_RATE} {NIC_LATENCY} 0")
    lines += [f"{a} {b} {NIC_RATE} {NIC_LATENCY} 0" for a in leaf for b in spine]
    return "\n".join(lines) + "\n"


def workload_text(case: SimaiCase) -> str:
    """SimAI's workload: one layer, the collective in its weight-gradient phase over all GPUs (TP 1, DP all);
    the header carries `ep pp vpp ga all_gpus`, without which SimAI 1.6 dies of SIGFPE."""
    header = (f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 "
              f"all_gpus: {case.num_gpus} checkpoints: 0 checkpoint_initiates: 0")
    # name, reserved, fwd compute, fwd collective, bytes, ig compute, ig collective, bytes, wg compute,
    # wg collective, bytes, update time
    layer = ["c0", "-1", "1", "NONE", "0", "1", "NONE", "0", "1", COLLECTIVES[case.collective],
             str(case.size_bytes), "1"]
    return f"{header}\n1\n" + "\t".join(layer) + "\n"
