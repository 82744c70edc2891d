"""A cluster model: GPU servers, the network between them, and how the communication library behaves.

One JSON file (`schema: fabriclab.cluster/1`) that `fabriclab calibrate nccl-tests` writes and
`simulate`, `whatif` and `plan` read with `--cluster FILE`. Three parts, and the GPUs' compute:

* `ServerSpec`: GPUs per server, their internal fabric (NVSwitch or PCIe) and its per-GPU bandwidth,
  the memory pass a collective makes over its buffer, NICs per server with rate and efficiency.
* `NetworkSpec`: rail-optimised or plain fat tree of the servers (`fabric/rail.py` builds it).
* `LibrarySpec`: what NCCL does, in the terms of its own cost model (NCCL 2.9 `src/graph/tuning.cc`):
  algorithms ring and tree, protocols LL / LL128 / Simple, each with a latency (a base plus a cost per
  intra-server step and per network step) and a bandwidth (a share of the links' rate, a ceiling, a cost
  per buffer byte), the channels, and the launch cost per GPU a process drives. The library runs, at
  every size, the algorithm and protocol its model says is fastest; `nccl/predict.py` computes that.
* `ComputeSpec` (optional): the GPU's roofline (`fabric/gpus.py`: peak FLOP/s per precision, HBM) and the
  share of the peak a model's math reaches, measured by `fabriclab calibrate step`. `cluster_gpu()` gives
  the GPU of any cluster: its `compute.gpu`, else the preset its `server.gpu_name` names.

`a100_hdr_prior()` holds data-sheet and NCCL-source values; calibration starts from such a prior and
moves what the logs determine (its report says which parameter came from where).

Try it: `python -c "from fabriclab.fabric.cluster import a100_hdr_prior, dumps; print(dumps(a100_hdr_prior()))"`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fabriclab.fabric.gpus import GPU_PRESET_NAMES, GpuSpec, gpu_for_name, gpu_preset
from fabriclab.fabric.kernels import KernelModel, kernel_model_from_dict
from fabriclab.fabric.links import Link, link_preset
from fabriclab.fabric.nccl_env import check_nccl_env
from fabriclab.fabric.nccl_tuner import TunerRule, rules_from_json
from fabriclab.fabric.resilience import ResilienceSpec, check_resilience
from fabriclab.fabric.storage import StorageSpec, check_storage
from fabriclab.textfile import read_text

SCHEMA = "fabriclab.cluster/1"
ALGORITHMS = ("ring", "tree")
PROTOCOLS = ("LL", "LL128", "Simple")
SELECTIONS = ("nccl", "fastest")
# The NCCL version of logs that do not say theirs, and of cluster files written before versions were recorded:
# fabriclab's model until then held NCCL 2.7.8's tuning constants (`nccl/versions.LEGACY_TABLE`), and its
# switch points sit where the shipped A100 logs' curves break (nccl-tests of that era print no version).
LEGACY_NCCL_VERSION = "2.7.8"


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """One server: GPUs, internal fabric, memory pass, NICs."""

    gpus_per_server: int
    """GPUs (ranks) per server."""
    gpu_name: str = "GPU"
    """GPU model as nccl-tests prints it, e.g. `A100-SXM4-40GB`."""
    intra: str = "nvswitch"
    """Internal fabric: `nvswitch` (every GPU on an NVSwitch / NVLink) or `pcie` (PCIe switches)."""
    intra_bandwidth_Bps: float
    """Per-GPU bandwidth into the internal fabric, per direction (NVLink or PCIe), bytes/s."""
    intra_latency_s: float = 0.75e-6
    """Latency of one hop of the internal fabric or of the NVLink domain's switches (topology links), s."""
    memory_bandwidth_Bps: float
    """Rate at which a GPU passes its whole buffer once during a collective (reads its input, writes its
    output), bytes/s: adds size/rate to every collective (the 1-GPU copy of nccl-tests measures ~this)."""
    pcie_bandwidth_Bps: float
    """GPU <-> NIC (PCIe switch) bandwidth per direction, bytes/s."""
    nics_per_server: int
    """NICs per server; GPU g uses NIC g * nics / gpus (several GPUs share one when fewer)."""
    nic_bandwidth_Bps: float
    """Line rate of one NIC per direction, bytes/s (200 Gb/s HDR = 25e9)."""
    nic_efficiency: float = 1.0
    """Share of the NIC line rate the library reaches (headers, GPUDirect, proxy), in (0, 1]."""
    nic_latency_s: float = 0.13e-6
    """Latency of one network hop (NIC or switch port), s."""
    gpus_per_domain: int = 0
    """GPUs one NVLink domain joins across servers (compute trays) through NVLink switches outside them, at
    `intra_bandwidth_Bps` per GPU: 72 on a GB200 / GB300 NVL72 rack of 18 trays of 4 (`fabric/domains.py`);
    0: the server is the domain (an HGX / DGX of 8)."""
    domain_gpus_used: int = 0
    """GPUs a job uses of each such domain, whole trays (64 of an NVL72's 72: 16 of its 18 trays, the rest spare);
    0: placement chooses, whole domains where they divide the job (`fabric/domains.py`)."""


@dataclass(frozen=True, kw_only=True)
class NetworkSpec:
    """The switches between the servers' NICs."""

    fabric: str = "rail"
    """`rail` (NIC k of every server on rail k's leaves) or `fat-tree` (a server's NICs share a leaf)."""
    leaf_ports: int = 20
    """NIC ports per leaf switch (HDR Quantum QM8700: 40 ports, 20 down and 20 up)."""
    bisection: float = 1.0
    """Leaf up-links per down-port, in (0, 1]; 1 is non-blocking."""
    sharp: bool = False
    """The switches reduce in the network (NVIDIA SHARP, with NCCL's SHARP plugin loaded): NCCL may then
    run CollNet across servers (`nccl/choice.py`)."""
    servers_per_building: int = 0
    """Servers one building holds, each building with its own leaves and spines; servers fill the buildings in
    order and the buildings meet on a third tier (`fabric/buildings.py`). 0: one building, however large."""
    building_bandwidth_Bps: float = 0.0
    """Each building's bandwidth to the third tier, per direction; 0: as much as its NICs (non-blocking)."""
    building_latency_s: float = 0.0
    """One-way latency the third tier adds (fibre: about 5 us per km)."""
    routing: str = "ideal"
    """How flows find a spine (`nccl/routing.py`): `ideal` (D-mod-K, spread perfectly), `ecmp` (each flow
    the library opens hashed to one spine: per channel, peer and QP) or `adaptive` (InfiniBand adaptive
    routing, Spectrum-X, packet spraying: every flow over every equal path)."""
    qps_per_connection: int = 1
    """Queue pairs NCCL opens per connection (NCCL_IB_QPS_PER_CONNECTION): each one a flow the switches hash."""
    hash_per_message: bool = False
    """`ecmp` hashes every message of a connection anew (each carries its own source port, as SimAI's MockNccl
    gives them; flowlet switching) instead of once per connection for the whole job."""
    messages_in_flight: float = 1.0
    """Messages a connection has on the wire at once when `hash_per_message` (each hashed by itself)."""
    routing_seed: int = 0
    """The draw of the hashes (a job's ports change at every launch: `--seeds N` reports over N draws)."""
    transport: str = "ideal"
    """Congestion control on a link asked for more than it carries (`nccl/congestion.py`): `ideal` (max-min
    fair, fully used), `roce` (DCQCN rate control with PFC) or `ib` (InfiniBand credits)."""
    placement: str = "packed"
    """Where a job's servers sit (`nccl/links.py`): `packed` (the first servers, leaf by leaf) or `scattered`
    (a seeded draw, `routing_seed`, of the servers a busy scheduler hands out: `busy_share` of the cluster
    holds other jobs, so the job's servers spread over more leaves and its rings cross them)."""
    busy_share: float = 0.0
    """With `scattered`: the share of the cluster's servers other jobs hold, in [0, 1)."""


@dataclass(frozen=True, kw_only=True)
class StepLatency:
    """Latency of one algorithm with one protocol, as NCCL's model writes it."""

    base_s: float
    """Fixed cost of one collective call, s."""
    intra_step_s: float
    """Cost of one step between GPUs of a server, s."""
    net_step_s: float
    """Cost of one step across the network, s."""


@dataclass(frozen=True, kw_only=True)
class ProtocolSpec:
    """How much of the links' bandwidth a protocol uses, and what else limits it."""

    link_factor: float
    """Share of the link rate left for data by the wire format (LL 1/4 in NCCL's model, LL128 120/128)."""
    busbw_cap_Bps: float | None = None
    """Ceiling on busbw from the GPU side (threads per channel), bytes/s; None: none."""
    per_byte_s: float = 0.0
    """Extra cost per byte a step handles (LL's flag handling), s per byte: a ring's step handles one
    rank's chunk (size / ranks), a tree's the whole buffer."""


def _default_protocols() -> dict[str, ProtocolSpec]:
    return {"LL": ProtocolSpec(link_factor=0.25, per_byte_s=1 / 5e9),
            "LL128": ProtocolSpec(link_factor=120 / 128, busbw_cap_Bps=16.7e9 * 16),
            "Simple": ProtocolSpec(link_factor=1.0)}


@dataclass(frozen=True, kw_only=True)
class LibrarySpec:
    """The communication library in the terms of NCCL's cost model."""

    name: str = "nccl"
    """Library name."""
    num_channels: int = 16
    """Rings (and trees) run in parallel, each on its share of the buffer."""
    launch_s: float = 4e-6
    """Launch cost per GPU a process drives (nccl-tests -g N: N launches one after another), s."""
    host_overhead_s: float = 0.5e-6
    """Host-side cost of a call that moves nothing (1 rank, in place), s."""
    algorithms: tuple[str, ...] = ALGORITHMS
    """Algorithms the library may choose (tree only across servers, for allreduce)."""
    tree_efficiency: float = 0.9
    """Share of the link-limited bandwidth a tree reaches (NCCL's model: 0.9)."""
    selection: str = "nccl"
    """How the algorithm and protocol are chosen per size: `nccl` (the tuning model of NCCL version
    `nccl_version`, `nccl/choice.py`) or `fastest` (the cheapest by this model, for other libraries)."""
    nccl_version: str = LEGACY_NCCL_VERSION
    """NCCL version (`2.18.3`) whose tuning model picks the algorithm and protocol and whose constants
    the prior holds (`nccl/versions.py`): read from the logs, or given with `--nccl-version`."""
    selection_busbw_cap_Bps: float | None = None
    """busBw ceiling in NCCL's tuning model (235 GB/s on compute capability 8.0, A100); None: none."""
    p2p_channel_bandwidth_Bps: float | None = None
    """What one channel moves point to point to a peer on another server, bytes/s: a transfer runs on the
    few channels NCCL gives such a peer (`versions.p2p_net_channels`: one for a ring shift over many
    servers), so it can stay under the NIC's rate. Calibrated where the logs hold a sendrecv across
    servers (prior: NCCL 2.29's own 14 GB/s); None: not known, no ceiling. Left out of the JSON then."""
    protocols: dict[str, ProtocolSpec] = field(default_factory=_default_protocols)
    """Protocol name -> its bandwidth limits."""
    latencies: dict[str, dict[str, StepLatency]] | None = None
    """Algorithm -> protocol -> latency; None: NCCL's own constants of `nccl_version` (baseLat, hwLat of
    `src/graph/tuning.cc`; `nccl/library.py` writes them out). A calibrated file holds its fitted ones."""
    nccl_env: dict[str, str] = field(default_factory=dict)
    """NCCL variables the runs were made with that the model reads (`NCCL_ALGO`, `NCCL_PROTO`,
    `NCCL_NVLS_ENABLE` restrict the algorithms and protocols, `NCCL_BUFFSIZE` sizes a tree's Simple chunk:
    `fabric/nccl_env.py`); empty: NCCL's defaults. Left out of the
    JSON when empty."""
    tuner: tuple[TunerRule, ...] = ()
    """A tuner plugin's rules that override NCCL's choice per communicator and size (`fabric/nccl_tuner.py`:
    Google's gIB / TCPXO tuner configs); empty: NCCL's own choice. Left out of the JSON when empty."""


@dataclass(frozen=True, kw_only=True)
class ComputeSpec:
    """The GPUs' compute: their roofline and the share of it a model's math is measured to reach."""

    gpu: GpuSpec
    """Peak FLOP/s per precision, HBM capacity and bandwidth of one GPU."""
    efficiency: dict[str, float] = field(default_factory=dict)
    """Precision -> achieved share of the peak for a model's math, in (0, 1]: found by `fabriclab
    calibrate step` from a measured step, never guessed; empty until one is measured."""
    efficiency_source: str = ""
    """The measurement that gave `efficiency` or `scale` (model, parallelism, GPUs, step time)."""
    kernels: KernelModel | None = None
    """The GPU's kernel speeds by shape (`fabriclab calibrate kernels`); None: its generation's defaults
    (`fabric/kernels.py`)."""
    scale: dict[str, float] = field(default_factory=dict)
    """Precision -> the share of the kernels' own speed a framework's step keeps (`fabriclab calibrate
    step`); absent: 1 (the kernels as measured alone)."""
    host_scale: dict[str, float] = field(default_factory=dict)
    """Precision -> the host's dispatch speed over its model's (`fabric/host.py`), where `calibrate step`
    found the measured step host-bound; absent: 1. It stays with the host: another GPU does not move it."""

    def __post_init__(self) -> None:
        if not isinstance(self.scale, dict) or any(
                not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= 2 for v in self.scale.values()):
            raise ValueError(f"compute.scale is {self.scale!r}: give a mapping of precision to a number in (0, 2]")
        if not isinstance(self.host_scale, dict) or any(
                not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v <= 100
                for v in self.host_scale.values()):
            raise ValueError(f"compute.host_scale is {self.host_scale!r}: give a mapping of precision to a number "
                             f"in (0, 100]")
        if not isinstance(self.efficiency, dict):
            raise ValueError(f"compute.efficiency is {self.efficiency!r}: give a mapping of precision to a "
                             f"share of the peak, e.g. {{'bf16': 0.45}}")
        for key, value in self.efficiency.items():
            if key not in self.gpu.peak_flops:
                raise ValueError(f"compute.efficiency has {key!r}, which GPU {self.gpu.name} has no peak for: "
                                 f"use one of {', '.join(self.gpu.peak_flops)}")
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
                raise ValueError(f"compute.efficiency.{key} is {value!r}; give a share in (0, 1]")


@dataclass(frozen=True, kw_only=True)
class ClusterModel:
    """Servers, network and library: everything a prediction needs."""

    name: str
    """Short name, e.g. `a100-hdr` or the file it was calibrated from."""
    description: str = ""
    """Where the numbers come from."""
    server: ServerSpec
    """The servers."""
    network: NetworkSpec = field(default_factory=NetworkSpec)
    """The switches between them."""
    library: LibrarySpec = field(default_factory=LibrarySpec)
    """The communication library."""
    fit: dict | None = None
    """Calibration summary (logs, parameters fitted or prior, residuals); None for a preset."""
    compute: ComputeSpec | None = None
    """The GPUs' roofline and measured efficiency; None: the preset `server.gpu_name` names (`cluster_gpu`)."""
    storage: StorageSpec = field(default_factory=StorageSpec)
    """Where checkpoints are written and read, and how fast (`fabric/storage.py`; default: Llama 3's path)."""
    resilience: ResilienceSpec = field(default_factory=ResilienceSpec)
    """Dual ToR, spare spine capacity, spare servers (`fabric/resilience.py`; default: none of them)."""


def cluster_gpu(cluster: ClusterModel) -> GpuSpec:
    """The cluster's GPU: `compute.gpu` when the cluster has one, else the preset its `server.gpu_name`
    names; a ValueError says how to give one when neither is known."""
    if cluster.compute is not None:
        return cluster.compute.gpu
    gpu = gpu_for_name(cluster.server.gpu_name)
    if gpu is None:
        raise ValueError(f"cluster {cluster.name!r} names GPU {cluster.server.gpu_name!r}, which fabriclab does "
                         f"not know: add a `compute` section to the cluster file (`compute.gpu` with name, "
                         f"peak_flops, memory_bytes, memory_bandwidth_Bps, source), or start from a cluster "
                         f"preset whose GPU is one of {', '.join(GPU_PRESET_NAMES)}")
    return gpu


def prior_cluster(*, gpus_per_server: int, gpu_name: str = "GPU", intra: str = "nvswitch",
                  intra_link: Link | None = None, nic: Link | None = None, nics_per_server: int | None = None,
                  pcie: Link | None = None, fabric: str = "rail", name: str = "prior",
                  library: str = "nccl", memory_bandwidth_Bps: float = 1.555e12,
                  leaf_ports: int = NetworkSpec.leaf_ports, description: str | None = None,
                  nccl_version: str = LEGACY_NCCL_VERSION, compute: ComputeSpec | None = None) -> ClusterModel:
    """A cluster from data sheets and NCCL's constants (`library="nccl"`), or a plain ring library such as
    Gloo over TCP (`library="gloo"`: one protocol, the cheapest choice): the starting point of a calibration.
    `compute` (the GPUs' roofline) is kept as given."""
    intra_link = intra_link or link_preset(_nvlink_for(gpu_name) if intra == "nvswitch" else "PCIe4x16")
    nic = nic or link_preset("HDR")
    pcie = pcie or link_preset("PCIe4x16")
    nics = gpus_per_server if nics_per_server is None else nics_per_server
    server = ServerSpec(gpus_per_server=gpus_per_server, gpu_name=gpu_name, intra=intra,
                        intra_bandwidth_Bps=intra_link.effective_bandwidth(True), intra_latency_s=0.75e-6,
                        # half of the HBM rate (A100-40GB: 1.555 TB/s): one read and one write of the buffer
                        memory_bandwidth_Bps=memory_bandwidth_Bps / 2, pcie_bandwidth_Bps=pcie.effective_bandwidth(True),
                        nics_per_server=nics, nic_bandwidth_Bps=nic.bandwidth_Bps,
                        nic_efficiency=nic.efficiency, nic_latency_s=nic.latency_s)
    # NCCL 2.9 caps its modelled busBw at 235 GB/s on compute capability 8.0 (A100) only.
    lib = LibrarySpec(num_channels=max(2 * nics, 2), nccl_version=nccl_version,
                      selection_busbw_cap_Bps=235e9 if "A100" in gpu_name.upper() else None)
    if library == "gloo":
        # Gloo's ring over TCP: one protocol, no launches; tens of microseconds per step through the kernel's
        # TCP stack (the order of fabriclab's own loopback measurements), chosen by cost, not by a model.
        step = StepLatency(base_s=20e-6, intra_step_s=20e-6, net_step_s=50e-6)
        lib = LibrarySpec(name="gloo", num_channels=1, launch_s=1e-6, host_overhead_s=5e-6, algorithms=("ring",),
                          protocols={"Simple": ProtocolSpec(link_factor=1.0)}, latencies={"ring": {"Simple": step}},
                          selection="fastest")
    elif library != "nccl":
        raise ValueError(f"library={library!r}: use nccl or gloo")
    text = (f"prior: {intra_link.name} inside, {nics} x {nic.name} per server, NCCL {nccl_version}'s constants"
            if description is None else description)
    return ClusterModel(name=name, description=text, server=server,
                        network=NetworkSpec(fabric=fabric, leaf_ports=leaf_ports), library=lib, compute=compute)


def _nvlink_for(gpu_name: str) -> str:
    # H200 has the H100's NVLink 4 (H200 data sheet: 900 GB/s both ways); B200, B300 (and GB200, GB300) NVLink 5.
    for keys, preset in ((("B200", "B300"), "NVLink-B200"), (("H100", "H200"), "NVLink-H100"), (("A100",), "NVLink-A100"),
                         (("V100",), "NVLink-V100")):
        if any(key in gpu_name.upper() for key in keys):
            return preset
    return "NVLink-A100"


def a100_hdr_prior() -> ClusterModel:
    """Azure ND A100 v4 as the shipped nccl-tests logs describe it: 8 A100-SXM4 on NVSwitch, 8 x HDR
    (`fabric/presets.py` holds it with the other presets)."""
    gpu = gpu_preset("a100-40gb")
    return prior_cluster(gpus_per_server=8, gpu_name=gpu.name, name="a100-hdr",
                         memory_bandwidth_Bps=gpu.memory_bandwidth_Bps, compute=ComputeSpec(gpu=gpu))


# ---------------------------------------------------------------- JSON

def to_dict(model: ClusterModel) -> dict:
    """The JSON form (schema first; `compute` null when the cluster gives none)."""
    data = asdict(model)
    data["library"]["algorithms"] = list(model.library.algorithms)
    if model.server.gpus_per_domain == 0:  # the server is its NVLink domain: the file reads as before domains
        data["server"].pop("gpus_per_domain")
    if model.server.domain_gpus_used == 0:
        data["server"].pop("domain_gpus_used")
    if not model.library.nccl_env:  # NCCL's defaults: the file reads as before the variables were modelled
        data["library"].pop("nccl_env")
    if not model.library.tuner:
        data["library"].pop("tuner")
    if model.library.p2p_channel_bandwidth_Bps is None:
        data["library"].pop("p2p_channel_bandwidth_Bps")
    for key, plain in (("storage", StorageSpec()), ("resilience", ResilienceSpec())):
        if getattr(model, key) == plain:  # the defaults: the file reads as before checkpoints were modelled
            data.pop(key)
    if model.network.servers_per_building == 0:  # one building: the file reads as before the third tier
        for key in ("servers_per_building", "building_bandwidth_Bps", "building_latency_s"):
            data["network"].pop(key)
    plain = NetworkSpec()  # the fabric as it runs, where it is the flow model's: the file reads as before
    for key in ("routing", "qps_per_connection", "hash_per_message", "messages_in_flight", "routing_seed",
                "transport", "placement", "busy_share"):
        if getattr(model.network, key) == getattr(plain, key):
            data["network"].pop(key)
    return {"schema": SCHEMA, **data}


def dumps(model: ClusterModel) -> str:
    """The JSON text of a cluster file."""
    return json.dumps(to_dict(model), indent=2, allow_nan=False) + "\n"


def save_cluster(model: ClusterModel, path: Path | str) -> None:
    """Write the cluster file."""
    Path(path).write_text(dumps(model))


def load_cluster(path: Path | str) -> ClusterModel:
    """Read a cluster file; a ValueError naming the file and the key on bad content."""
    path = Path(path)
    try:
        data = json.loads(read_text(path, "cluster file"))
    except OSError as exc:
        raise ValueError(f"cannot read cluster file {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"cluster file {path} is not JSON (line {exc.lineno}: {exc.msg}): write it with "
                         f"`fabriclab calibrate nccl-tests ... --out {path.name}`") from None
    return from_dict(data, str(path))


def from_dict(data: object, where: str = "<cluster>") -> ClusterModel:
    """A ClusterModel from its JSON form, every field checked."""
    if not isinstance(data, dict):  # bad file content is bad user input: ValueError, as everywhere
        raise ValueError(f"cluster file {where}: expected a JSON object at the top")  # noqa: TRY004
    if data.get("schema") != SCHEMA:
        raise ValueError(f"cluster file {where}: schema is {data.get('schema')!r}, this fabriclab reads "
                         f"{SCHEMA!r}: calibrate again to write a current file")
    try:
        server = _build(ServerSpec, _section(data, "server", where), f"{where}: server")
        network = _build(NetworkSpec, data.get("network", {}), f"{where}: network")
        lib = dict(_section(data, "library", where))
        protocols = {p: _build(ProtocolSpec, v, f"{where}: library.protocols.{p}")
                     for p, v in _mapping(lib.pop("protocols", None), f"{where}: library.protocols").items()}
        given = lib.pop("latencies", None)
        latencies = None if given is None else {
            a: {p: _build(StepLatency, v, f"{where}: library.latencies.{a}.{p}")
                for p, v in _mapping(row, f"{where}: library.latencies.{a}").items()}
            for a, row in _mapping(given, f"{where}: library.latencies").items()}
        lib["algorithms"] = tuple(lib.get("algorithms", ALGORITHMS))
        lib["tuner"] = rules_from_json(lib.get("tuner", []), f"cluster file {where}")
        if lib.get("selection") == "nccl-2.9":  # files written before the version was recorded (2.7.8's model)
            lib["selection"], lib["nccl_version"] = "nccl", LEGACY_NCCL_VERSION
        library = _build(LibrarySpec, {**lib, "protocols": protocols, "latencies": latencies},
                         f"{where}: library")
        model = ClusterModel(name=str(data.get("name", "cluster")), description=str(data.get("description", "")),
                             server=server, network=network, library=library, fit=data.get("fit"),
                             compute=_compute(data.get("compute"), where),
                             storage=_build(StorageSpec, data.get("storage", {}), f"{where}: storage"),
                             resilience=_build(ResilienceSpec, data.get("resilience", {}), f"{where}: resilience"))
    except TypeError as exc:
        raise ValueError(f"cluster file {where}: {exc}") from None
    check_cluster(model, where)
    return model


def _compute(value: object, where: str) -> ComputeSpec | None:
    """The `compute` section: absent or null (files written before it existed) -> None."""
    if value is None:
        return None
    section = dict(_mapping(value, f"{where}: compute"))
    gpu = _build(GpuSpec, section.pop("gpu", None), f"{where}: compute.gpu")
    if section.get("kernels") is not None:
        section["kernels"] = kernel_model_from_dict(section["kernels"], f"cluster file {where}: compute.kernels")
    return _build(ComputeSpec, {**section, "gpu": gpu}, f"{where}: compute")


def _section(data: dict, key: str, where: str) -> dict:
    if not isinstance(data.get(key), dict):
        raise ValueError(f"cluster file {where}: missing the {key!r} object")  # noqa: TRY004
    return data[key]


def _mapping(value: object, where: str) -> dict:
    if not isinstance(value, dict) or not value:
        raise ValueError(f"cluster file {where}: expected a non-empty JSON object")
    return value


def _build(cls, values: object, where: str):
    if not isinstance(values, dict):
        raise ValueError(f"cluster file {where}: expected a JSON object")  # noqa: TRY004
    known = {f for f in cls.__dataclass_fields__}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"cluster file {where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:  # missing keys; out-of-range values the class itself rejects
        raise ValueError(f"cluster file {where}: {exc}") from None


def check_cluster(model: ClusterModel, where: str = "<cluster>") -> None:
    """ValueError naming `where` and the field when a value is out of range."""
    s, n, lib = model.server, model.network, model.library
    ints = {"server.gpus_per_server": s.gpus_per_server, "server.nics_per_server": s.nics_per_server,
            "network.leaf_ports": n.leaf_ports, "library.num_channels": lib.num_channels}
    for key, value in ints.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"cluster file {where}: {key} is {value!r}; give a whole number >= 1")
    if s.gpus_per_server % s.nics_per_server:
        raise ValueError(f"cluster file {where}: {s.nics_per_server} NICs cannot serve {s.gpus_per_server} GPUs "
                         f"evenly; give a NIC count that divides the GPU count")
    check_domain(s, where)
    check_nccl_env(lib.nccl_env, f"cluster file {where}")
    positive = {"server.intra_bandwidth_Bps": s.intra_bandwidth_Bps, "server.memory_bandwidth_Bps":
                s.memory_bandwidth_Bps, "server.pcie_bandwidth_Bps": s.pcie_bandwidth_Bps,
                "server.nic_bandwidth_Bps": s.nic_bandwidth_Bps}
    nonneg = {"server.intra_latency_s": s.intra_latency_s, "server.nic_latency_s": s.nic_latency_s,
              "network.servers_per_building": n.servers_per_building,
              "network.building_bandwidth_Bps": n.building_bandwidth_Bps,
              "network.building_latency_s": n.building_latency_s,
              "library.launch_s": lib.launch_s, "library.host_overhead_s": lib.host_overhead_s}
    for a, row in (lib.latencies or {}).items():
        for p, lat in row.items():
            for key, value in asdict(lat).items():
                nonneg[f"library.latencies.{a}.{p}.{key}"] = value
    for p, proto in lib.protocols.items():
        nonneg[f"library.protocols.{p}.per_byte_s"] = proto.per_byte_s
        if proto.busbw_cap_Bps is not None:
            positive[f"library.protocols.{p}.busbw_cap_Bps"] = proto.busbw_cap_Bps
    if lib.selection_busbw_cap_Bps is not None:
        positive["library.selection_busbw_cap_Bps"] = lib.selection_busbw_cap_Bps
    if lib.p2p_channel_bandwidth_Bps is not None:
        positive["library.p2p_channel_bandwidth_Bps"] = lib.p2p_channel_bandwidth_Bps
    for table, ok, what in ((positive, lambda v: v > 0, "> 0"), (nonneg, lambda v: v >= 0, ">= 0")):
        for key, value in table.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                    or not ok(value):
                raise ValueError(f"cluster file {where}: {key} is {value!r}; give a number {what}")
    for key, value in (("server.nic_efficiency", s.nic_efficiency), ("network.bisection", n.bisection),
                       ("library.tree_efficiency", lib.tree_efficiency)):
        if not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ValueError(f"cluster file {where}: {key} is {value!r}; give a share in (0, 1]")
    for p, proto in lib.protocols.items():
        if not 0 < proto.link_factor <= 1:
            raise ValueError(f"cluster file {where}: library.protocols.{p}.link_factor is {proto.link_factor!r}; "
                             f"give a share in (0, 1]")
    if not isinstance(n.sharp, bool):
        raise ValueError(f"cluster file {where}: network.sharp is {n.sharp!r}; give true or false")
    if not isinstance(n.servers_per_building, int) or isinstance(n.servers_per_building, bool):
        raise ValueError(f"cluster file {where}: network.servers_per_building is {n.servers_per_building!r}; give a "
                         f"whole number of servers (0: one building)")
    check_routing(n, where)
    check_storage(model.storage, where)
    check_resilience(model.resilience, where)
    choices = {"server.intra": (s.intra, ("nvswitch", "pcie")), "network.fabric": (n.fabric, ("rail", "fat-tree")),
               "library.selection": (lib.selection, SELECTIONS)}
    for key, (value, allowed) in choices.items():
        if value not in allowed:
            raise ValueError(f"cluster file {where}: {key} is {value!r}; use one of {', '.join(allowed)}")
    if lib.latencies is None:
        if lib.selection != "nccl":
            raise ValueError(f"cluster file {where}: library.latencies is missing; only an NCCL library "
                             f"(selection nccl) takes its latencies from its version")
        return
    bad_algos = [a for a in lib.algorithms if a not in ALGORITHMS or a not in lib.latencies]
    if bad_algos or not lib.algorithms:
        raise ValueError(f"cluster file {where}: library.algorithms {list(lib.algorithms)}: use ring and/or "
                         f"tree, each with a library.latencies entry")
    for a in lib.algorithms:
        missing = [p for p in lib.protocols if p not in lib.latencies[a]]
        if missing:
            raise ValueError(f"cluster file {where}: library.latencies.{a} has no {missing[0]!r} entry")


ROUTINGS = ("ideal", "ecmp", "adaptive")
TRANSPORTS = ("ideal", "roce", "ib")
PLACEMENTS = ("packed", "scattered")


def check_routing(n: NetworkSpec, where: str) -> None:
    """ValueError naming the field when the network's routing or transport is not one fabriclab models."""
    for key, value, allowed in (("routing", n.routing, ROUTINGS), ("transport", n.transport, TRANSPORTS)):
        if value not in allowed:
            raise ValueError(f"cluster file {where}: network.{key} is {value!r}; use one of {', '.join(allowed)}")
    for key, least, most in (("qps_per_connection", 1, 64), ("routing_seed", 0, 2**32 - 1)):
        value = getattr(n, key)
        if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
            raise ValueError(f"cluster file {where}: network.{key} is {value!r}; give a whole number from {least} "
                             f"to {most}")
    if not isinstance(n.hash_per_message, bool):
        raise ValueError(f"cluster file {where}: network.hash_per_message is {n.hash_per_message!r}; give true or false")
    m = n.messages_in_flight
    if not isinstance(m, (int, float)) or isinstance(m, bool) or not 1 <= m <= 64:
        raise ValueError(f"cluster file {where}: network.messages_in_flight is {m!r}; give a number from 1 to 64")
    if n.placement not in PLACEMENTS:
        raise ValueError(f"cluster file {where}: network.placement is {n.placement!r}; use one of "
                         f"{', '.join(PLACEMENTS)}")
    b = n.busy_share
    if not isinstance(b, (int, float)) or isinstance(b, bool) or not 0 <= b < 1:
        raise ValueError(f"cluster file {where}: network.busy_share is {b!r}; give a share in [0, 1), e.g. 0.5")
    if b and n.placement != "scattered":
        raise ValueError(f"cluster file {where}: network.busy_share is {b!r} with placement {n.placement!r}; a busy "
                         f"share goes with placement scattered (a packed job holds the first servers)")


def check_domain(s: ServerSpec, where: str) -> None:
    """ValueError naming the user's numbers when the NVLink domain is not whole servers (trays)."""
    d, g = s.gpus_per_domain, s.gpus_per_server
    if not isinstance(d, int) or isinstance(d, bool) or d < 0:
        raise ValueError(f"cluster file {where}: server.gpus_per_domain is {d!r}; give the GPUs of one NVLink "
                         f"domain (72 for an NVL72 rack), or 0 when the server is the domain")
    if d and (d < g or d % g):
        fits = ", ".join(str(k * g) for k in (d // g, d // g + 1) if k)
        raise ValueError(f"cluster file {where}: server.gpus_per_domain {d} is not whole servers of "
                         f"server.gpus_per_server {g} GPUs: an NVLink domain joins whole compute trays; give "
                         f"gpus_per_domain a multiple of {g} ({fits}), or gpus_per_server the GPUs of one tray "
                         f"(an NVL72 rack: gpus_per_server 4, gpus_per_domain 72)")
    u = s.domain_gpus_used
    if not isinstance(u, int) or isinstance(u, bool) or u < 0 or (u and (u % g or u > max(d, g))):
        raise ValueError(f"cluster file {where}: server.domain_gpus_used is {u!r}; give the GPUs a job uses of each "
                         f"NVLink domain of {max(d, g)}, whole trays of {g} (e.g. {max(d, g) // g * g}), or 0 to let "
                         f"placement choose")
    if d and s.intra != "nvswitch":
        raise ValueError(f"cluster file {where}: server.gpus_per_domain {d} with server.intra {s.intra!r}: a domain "
                         f"across servers is NVLink switches; give intra \"nvswitch\" or gpus_per_domain 0")


def with_server(model: ClusterModel, **changes) -> ClusterModel:
    """The model with server fields replaced."""
    return replace(model, server=replace(model.server, **changes))


def swap_nic(model: ClusterModel, nic: Link, where: str = "") -> ClusterModel:
    """The same servers, network and library with NIC `nic` instead (a what-if): its line rate and latency;
    the calibrated share of the line rate the library reaches (`nic_efficiency`) is kept. The returned
    description says what was swapped, and when the GPU-to-NIC PCIe path is slower than the new NIC."""
    s = model.server
    old = f"{s.nic_bandwidth_Bps * 8 / 1e9:g} Gb/s"
    text = (f"{model.name}{' (' + where + ')' if where and where != model.name else ''} with {s.nics_per_server} x "
            f"{nic.name} ({nic.bandwidth_Bps * 8 / 1e9:g} Gb/s) per server instead of its {s.nics_per_server} x {old} "
            f"NICs; servers, network, library and the fitted NIC efficiency {s.nic_efficiency:.3g} kept")
    if s.pcie_bandwidth_Bps < nic.bandwidth_Bps * s.nic_efficiency:
        text += (f"; its GPU-to-NIC PCIe path ({s.pcie_bandwidth_Bps / 1e9:.1f} GB/s) is slower than the new NIC "
                 f"({nic.bandwidth_Bps * s.nic_efficiency / 1e9:.1f} GB/s) and limits it")
    swapped = replace(s, nic_bandwidth_Bps=nic.bandwidth_Bps, nic_latency_s=nic.latency_s)
    return replace(model, name=f"{model.name}+{nic.name}", description=text, server=swapped)
