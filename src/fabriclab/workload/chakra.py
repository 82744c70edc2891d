"""Chakra execution traces (the per-rank `.et` files ASTRA-sim reads) to and from fabriclab's rank graphs.

The messages and their wire format are `workload/etfile.py`; this module maps rank graphs onto them with
the conventions ASTRA-sim (astra-sim 518bd51, the build in `../shared/tools/astra-sim`) runs, so that what
`write_et` writes runs there and reads back exactly. One file per rank, `<prefix>.<rank>.et`, the name
ASTRA-sim opens (astra-sim/workload/Workload.cc: `et_filename + "." + to_string(sys->id) + ".et"`); ASTRA-sim
simulates as many ranks as its network has NPUs, and every one needs its file.

Mapping (attribute names and value types as Chakra's feeder reads them, chakra src/feeder_v3/et_feeder_node.h;
integer kinds convert into each other there):
- compute op -> COMP_NODE: `duration_micros` (rounded; ASTRA-sim replays it in nanoseconds x 1000, and 0 as
  1 ns: Workload.cc issue_replay), `num_ops` (int64, the FLOPs), `tensor_size` (uint64, `Op.memory_bytes`),
  `is_cpu_op` false. Replay mode (`roofline-enabled` off in ASTRA-sim's system file) takes
  `duration_micros`; roofline mode costs a GPU node num_ops / min(peak-perf, local-mem-bw x num_ops /
  tensor_size) (Workload.cc issue_comp), needs both attributes on every such node (the feeder throws
  where one is missing, and the rank never finishes) and divides 0 by 0 at num_ops 0: both are written
  on every node, at least 1, so an op without FLOPs costs its bytes at the memory bandwidth, one without
  bytes its FLOPs at the peak, one with neither nothing.
- collective -> COMM_COLL_NODE: `comm_type` (int64, CollectiveCommType), `comm_size` (int64), `pg_name`.
  Sizes: fabriclab's `size_bytes` is nccl-tests' buffer (the whole buffer of an all-reduce and an
  all-to-all's send buffer, the gathered output of an all-gather, the input of a reduce-scatter); ASTRA-sim
  takes the same, except for the all-gather, whose `comm_size` is one rank's contribution (see
  `astra_comm_size`). ASTRA-sim runs ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER and ALL_TO_ALL, replays
  BROADCAST from its duration, and stops at anything else ("Unsupported collective comm type"): a
  `reduce` is written as the REDUCE_SCATTER of its buffer (the same bytes on each ring link, less the
  last 1/n) and a `barrier` as a 4-byte ALL_REDUCE (torch.distributed's NCCL barrier all-reduces one
  element), each with `fabriclab_collective` so the reader gets it back.
- `pg_name` is ASTRA-sim's communicator group: the integer id of a group in its `--comm-group-configuration`
  JSON (`{"<id>": [ranks]}`, read by Workload::initialize_comm_groups), and "" or "0" for all ranks
  (Workload::extract_comm_group). When the graphs carry their communicator groups, each distinct group (a
  set of ranks, whichever communicators name it) gets an id from 1, the same in every rank's file, and
  `write_et` writes `<prefix>.comm_groups.json`; without groups `pg_name` is the communicator's name
  (which ASTRA-sim cannot run). A group smaller than all ranks runs as one ring over its ranks in the
  file's order, which is sorted here (system/CommunicatorGroup.cc get_collective_plan: several per-dimension
  algorithms are replaced by one "ring"); each hop costs the network dimension where the two ranks'
  addresses first differ (astra-network-analytical MultiDimTopology::send).
- send / recv -> COMM_SEND_NODE / COMM_RECV_NODE with `comm_src`, `comm_dst`, `comm_tag` (int32) and
  `comm_size`; ASTRA-sim matches a send with a receive on (tag, src, dst, size) and counts repeats of the
  same key in order (network_frontend/analytical/common/CallbackTracker.cc, ChunkIdGenerator.cc): the k-th
  send from a to b and the k-th receive at b from a share tag k (posted order). Its own collectives tag
  their messages from 500,000,000 up (Sys.hh FrontEndSendRecvType::COLLECTIVE), these from 0: no clash.
- Dependencies -> `data_deps`, in order. Stream order: an op whose previous op on its stream (in
  topological order, as `RankGraph.critical_path_s` takes them) is not among its dependencies gets
  that op appended to `data_deps`, and listed alone in `ctrl_deps` to mark the edge as the stream's (the
  reader takes it off again); ASTRA-sim's feeder (chakra src/feeder_v3/dependancy_solver.cpp) waits on
  both lists. So ASTRA-sim runs the ops in fabriclab's order, and a round trip is exact. ASTRA-sim runs
  one compute node and one comm node (sends and collectives; receives do not count) at a time per rank
  (astra-sim/workload/HardwareResource.cc), whatever stream fabriclab gives them.
- What the standard fields cannot hold goes into `fabriclab_*` attributes, only where needed: the exact
  seconds, FLOPs, memory and buffer bytes where the standard fields round or convert them, a group size,
  stream, collective or communicator other than the standard fields imply; the GlobalMetadata holds the
  rank, the rank count, and each communicator's ranks and pg_name.

A trace fabriclab did not write (no `fabriclab_graph` in its GlobalMetadata) is read from the standard
fields: durations, `num_ops`, `tensor_size`, comm types and sizes (`comm_size`, else `tensor_size`, in
ASTRA-sim's convention), `pg_name` (else "world"); group sizes from a communicator-group file when given,
else all ranks (`num_ranks`, by default one more than the highest rank among the files); compute on the
`compute` stream, communication on `comm`; `ctrl_deps` are ignored (Chakra's PyTorch converter puts the
enclosing CPU op there). Other node types (MEM_LOAD, METADATA, ...) become zero-time compute ops, comm
nodes marked `is_cpu_op` compute ops of their host time; `EtImport.unknown_nodes` counts both.

A trace is untrusted input: a file is read with bounds on its bytes, nodes and values (`workload/etfile.py`),
a trace on its ranks and nodes (`MAX_TRACE_NODES`, `etvalues.MAX_TRACE_RANKS`), and every value it gives an
op is typed and bounded (`workload/etvalues.py`): a ValueError names the file, the node and the field.

Try it: `fabriclab chakra example --out /tmp/demo && fabriclab chakra show /tmp/demo`.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from fabriclab.workload.etfile import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    NODE_TYPES,
    EtAttr,
    EtFile,
    EtNode,
    read_et_file,
    write_et_file,
)
from fabriclab.workload import etvalues as ev
from fabriclab.workload.graph import Op, RankGraph, topological

# The nodes of all a trace's files together: fabriclab's own GPT-3 175B export on 64 GPUs (4.9M nodes) read
# in 150 s and 2.3 GB here; one file is bounded by workload/etfile.py.
MAX_TRACE_NODES = 5_000_000
FORMAT_REVISION = 2  # `fabriclab_graph` in the GlobalMetadata: 2 = ASTRA-sim's all-gather size, tensor_size

# et_def.proto's CollectiveCommType, as the schema numbers our collectives.
COMM_TYPES = {"allreduce": 0, "reduce": 1, "allgather": 2, "broadcast": 5, "alltoall": 6, "reduce_scatter": 7,
              "barrier": 9}
COLLECTIVE_OF = {v: k for k, v in COMM_TYPES.items()}
# What is written in place of the collectives ASTRA-sim stops at (module docstring): collective, fixed bytes.
BARRIER_BYTES = 4  # torch.distributed.barrier on NCCL all-reduces a one-element tensor
WRITTEN_AS = {"reduce": ("reduce_scatter", None), "barrier": ("allreduce", BARRIER_BYTES)}
# Comm types with no collective of ours: read as the nearest one (GATHER / SCATTER move at most the
# bytes of an all-gather / broadcast of the same buffer), counted in EtImport.approximated.
FOREIGN_COMM_TYPES = {3: ("GATHER", "allgather"), 4: ("SCATTER", "broadcast"),
                      8: ("REDUCE_SCATTER_BLOCK", "reduce_scatter")}
# The smallest all-gather comm_size written: ASTRA-sim cuts a collective into comm_size /
# preferred-dataset-splits byte chunks, and an all-gather (the one collective it does not round up to a
# chunk of at least one byte per NPU, system/Sys.cc determine_chunk_size) with a chunk of 0 bytes never
# ends (comm_size 0: the rank stalls; below the splits: Sys::generate_collective loops forever). Any
# system file whose preferred-dataset-splits is at most this runs every all-gather.
MIN_ALLGATHER_COMM_SIZE = 64
# Op fields that `fabriclab_<field>` attributes carry where the standard fields do not.
EXTRA_FIELDS = ("duration_s", "flops", "memory_bytes", "communicator", "collective", "size_bytes", "group_size",
                "peer", "stream")


@dataclass(frozen=True, kw_only=True)
class EtImport:
    """Rank graphs read from `.et` files, with what could not be carried over exactly."""

    graphs: list[RankGraph]
    paths: list[Path]
    fabriclab_written: bool
    """Every file carries fabriclab's attributes (then the graphs are exactly those written)."""
    unknown_nodes: dict[str, int] = field(default_factory=dict)
    """Node type -> count of nodes read as compute ops: zero-time for memory, metadata and invalid nodes;
    with their host time for comm nodes marked `is_cpu_op` (the launch side of a collective)."""
    approximated: dict[str, int] = field(default_factory=dict)
    """Comm type -> count of collectives read as the nearest one of ours (FOREIGN_COMM_TYPES)."""


def astra_comm_size(collective: str, size_bytes: int, group_size: int) -> int:
    """ASTRA-sim's `comm_size` for a collective of `size_bytes` in nccl-tests' convention on `group_size` ranks.

    From astra-sim/system/astraccl/native_collectives/collective_algorithm/Ring.cc (the per-phase data size,
    `data_size` being comm_size): ALL_REDUCE sends data_size / n per step and ends with data_size (the
    whole buffer); REDUCE_SCATTER starts from data_size and ends with data_size / n (the input); ALL_TO_ALL
    sends data_size / n to each peer (the send buffer); ALL_GATHER sends data_size per step and ends with
    data_size x n, so its comm_size is one rank's contribution, the gathered output / n. Floors keep ASTRA-sim
    from stalling: an all-gather at least MIN_ALLGATHER_COMM_SIZE, anything else at least 1 byte (its
    network backend asserts a message of more than 0 bytes)."""
    if collective == "allgather":
        return max(int(size_bytes) // max(group_size, 1), MIN_ALLGATHER_COMM_SIZE)
    return max(int(size_bytes), 1)


def size_of_comm_size(collective: str, comm_size: int, group_size: int) -> int:
    """fabriclab's `size_bytes` (nccl-tests' convention) of ASTRA-sim's `comm_size` on `group_size` ranks."""
    return int(comm_size) * max(group_size, 1) if collective == "allgather" else int(comm_size)


# ---- rank graphs to nodes -------------------------------------------------------------------------

_EXTRA_KINDS = {"duration_s": "double", "flops": "double", "memory_bytes": "double", "communicator": "string",
                "collective": "string", "stream": "string", "size_bytes": "int64", "group_size": "int64",
                "peer": "int64"}
_INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True, kw_only=True)
class _Reading:
    """How one file's nodes map to ops, and the tallies of what did not map exactly."""

    fabriclab: bool
    num_ranks: int
    groups: dict[str, list[int]] | None = None
    """fabriclab: the rank's communicators by name; else ASTRA-sim's groups by pg_name."""
    pg_names: dict[str, str] = field(default_factory=dict)
    """fabriclab: pg_name -> communicator name."""
    astra_sizes: bool = True
    """comm_size in ASTRA-sim's convention (fabriclab's files of format revision 1 hold nccl-tests' sizes)."""
    unknown: dict[str, int] = field(default_factory=dict)
    approximated: dict[str, int] = field(default_factory=dict)


def comm_groups_path(prefix: Path | str) -> Path:
    """Where `write_et` puts ASTRA-sim's communicator-group file for `prefix`."""
    return Path(f"{prefix}.comm_groups.json")


def write_et(graphs: list[RankGraph], prefix: Path | str, *, ring_order=None) -> list[Path]:
    """Write one `<prefix>.<rank>.et` per graph (and `<prefix>.comm_groups.json` when the graphs carry
    their communicator groups); returns the `.et` paths in the order of `graphs`. `ring_order`: a function
    from a group's sorted ranks to the order the group file lists them in (ASTRA-sim's ring follows it)."""
    if not graphs:
        raise ValueError("write_et: no graphs to write; give at least one RankGraph")
    ranks = [g.rank for g in graphs]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise ValueError(f"write_et: ranks {twice} appear more than once; give one graph per rank")
    bad = [op.id for g in graphs for op in g.ops if op.id < 0][:3]
    if bad:
        raise ValueError(f"write_et: op ids {bad} are negative; a Chakra node id is a uint64, renumber from 0")
    groups = group_ids(graphs)
    paths = []
    try:  # the caller checked PREFIX.0.et before the work; another rank's path may still be a folder
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
        for g in graphs:
            pg = {name: str(groups[tuple(sorted(r))]) for name, r in (g.communicators or {}).items()}
            paths.append(write_et_file(f"{prefix}.{g.rank}.et", graph_nodes(g, pg), metadata=graph_metadata(g, pg)))
        if groups:
            order = ring_order or list
            lines = [f'  "{i}": {json.dumps([int(r) for r in order(members)])}' for members, i in groups.items()]
            comm_groups_path(prefix).write_text("{\n" + ",\n".join(lines) + "\n}\n")
    except OSError as exc:
        raise ValueError(f"cannot write the trace {prefix}.<rank>.et: {exc.filename or prefix}: "
                         f"{exc.strerror or exc}") from None
    return paths


def group_ids(graphs: list[RankGraph]) -> dict[tuple[int, ...], int]:
    """Each distinct group of ranks (sorted) of any graph's communicators -> its ASTRA-sim group id, from 1
    in sorted order: the same id in every rank's file, however many communicators name the group and in
    whatever order a graph lists its ranks (two ids for one group would put its ranks' halves of a
    collective on different streams, and ASTRA-sim would wait for them forever)."""
    found = {tuple(sorted(ranks)) for g in graphs for ranks in (g.communicators or {}).values()}
    return {members: i for i, members in enumerate(sorted(found), start=1)}


def graph_metadata(graph: RankGraph, pg: dict[str, str]) -> list[EtAttr]:
    """The GlobalMetadata attributes: the format revision, the rank, the rank count, each communicator's
    ranks and pg_name."""
    attrs = [EtAttr("fabriclab_graph", "int64", FORMAT_REVISION), EtAttr("fabriclab_rank", "int64", graph.rank),
             EtAttr("fabriclab_num_ranks", "int64", graph.num_ranks)]
    if graph.communicators is not None:
        names = list(graph.communicators)
        attrs += [EtAttr("fabriclab_communicators", "string_list", names),
                  EtAttr("fabriclab_pg_names", "string_list", [pg[n] for n in names])]
        attrs += [EtAttr(f"fabriclab_group.{n}", "int64_list", list(graph.communicators[n])) for n in names]
    return attrs


def graph_nodes(graph: RankGraph, pg: dict[str, str] | None = None) -> list[EtNode]:
    """One node per op, in list order (see the module docstring for the stream edges and tags); `pg`:
    communicator -> pg_name (default: the communicator's name)."""
    pg = pg or {}
    how = _Reading(fabriclab=True, num_ranks=graph.num_ranks, groups=graph.communicators,
                   pg_names={v: k for k, v in pg.items()})
    previous: dict[int, int | None] = {}
    last: dict[str, int] = {}
    for op in topological(graph.ops):
        previous[op.id] = last.get(op.stream)
        last[op.stream] = op.id
    tags: dict[tuple[int, int], int] = {}
    nodes = []
    for op in graph.ops:
        prev = previous[op.id]
        edge = () if prev is None or prev in op.deps else (prev,)
        tag = 0
        if op.kind == "comm" and op.collective in ("send", "recv"):
            pair = (graph.rank, op.peer) if op.collective == "send" else (op.peer, graph.rank)
            tag = tags[pair] = tags.get(pair, -1) + 1
        nodes.append(_node(op, graph.rank, edge, pg.get(op.communicator, op.communicator), tag, how))
    return nodes


_NOT_CPU = EtAttr("is_cpu_op", "bool", False)


def _node(op: Op, rank: int, edge: tuple[int, ...], pg: str, tag: int, how: _Reading) -> EtNode:
    attrs = [_NOT_CPU]
    if op.kind == "compute":
        node_type = COMP_NODE
        attrs += [EtAttr("num_ops", "int64", min(max(round(op.flops), 1), _INT64_MAX)),
                  EtAttr("tensor_size", "uint64", min(max(round(op.memory_bytes), 1), _INT64_MAX))]
    elif op.collective in ("send", "recv"):
        send = op.collective == "send"
        node_type = COMM_SEND_NODE if send else COMM_RECV_NODE
        src, dst = (rank, op.peer) if send else (op.peer, rank)
        attrs += [EtAttr("comm_src", "int32", src), EtAttr("comm_dst", "int32", dst),
                  EtAttr("comm_tag", "int32", tag), EtAttr("comm_size", "int64", max(int(op.size_bytes), 1))]
    else:
        node_type = COMM_COLL_NODE
        collective, fixed = WRITTEN_AS.get(op.collective, (op.collective, None))
        members = (how.groups or {}).get(op.communicator)
        n = len(members) if members else (op.group_size or how.num_ranks)
        size = astra_comm_size(collective, op.size_bytes if fixed is None else fixed, n)
        attrs += [EtAttr("comm_type", "int64", COMM_TYPES[collective]), EtAttr("comm_size", "int64", size)]
    if op.kind == "comm" and pg:
        attrs.append(EtAttr("pg_name", "string", pg))
    micros = round(op.duration_s * 1e6)
    standard = _op_fields(op.id, op.name, node_type, micros, attrs, how)  # what a reader gets: add what differs
    attrs += [EtAttr(f"fabriclab_{name}", _EXTRA_KINDS[name], getattr(op, name))
              for name in EXTRA_FIELDS if getattr(op, name) != standard[name]]
    return EtNode(id=op.id, name=op.name, type=node_type, ctrl_deps=edge, data_deps=tuple(op.deps) + edge,
                  duration_micros=micros, attrs=tuple(attrs))


# ---- nodes to rank graphs -------------------------------------------------------------------------

def _op_fields(node_id: int, name: str, t: int, micros: int, attrs, how: _Reading) -> dict:
    """The Op keyword arguments of a node (without deps), from its standard fields, then fabriclab's; every
    value typed and bounded (`workload/etvalues.py`: a ValueError names the node and the attribute)."""
    a = {x.name: x.value for x in attrs}
    at = f"node {node_id} ({name!r}):"
    f = {"id": node_id, "name": name, "kind": "comm", "duration_s": micros / 1e6, "flops": 0.0, "memory_bytes": 0.0,
         "communicator": "", "collective": "", "size_bytes": 0, "group_size": 0, "peer": -1, "stream": "comm"}
    if t in (COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE) and not (a.get("is_cpu_op") and not how.fabriclab):
        key = "comm_size" if "comm_size" in a else "tensor_size"
        size = ev.whole(a.get(key, 0), f"{at} {key}", maximum=MAX_COMM_BYTES)
        pg = str(a.get("pg_name", ""))
        communicator = how.pg_names.get(pg, pg) if how.fabriclab else pg or "world"
        f["communicator"], f["group_size"] = communicator, _group_size(pg, communicator, how)
        if t == COMM_COLL_NODE:
            comm_type = a.get("comm_type")
            f["collective"] = _collective(None if comm_type is None else ev.whole(comm_type, f"{at} comm_type"), how)
            n = (f["group_size"] or how.num_ranks) if how.astra_sizes else 1
            f["size_bytes"] = size_of_comm_size(f["collective"], size, n)
        else:
            f["collective"] = "send" if t == COMM_SEND_NODE else "recv"
            key = "comm_dst" if t == COMM_SEND_NODE else "comm_src"
            f["peer"] = a.get(key)  # checked below, after fabriclab's own attributes
            f["size_bytes"] = size
    else:
        f["kind"], f["stream"] = "compute", "compute"
        if t == COMP_NODE:
            f["flops"] = ev.number(a.get("num_ops", 0), f"{at} num_ops")
            f["memory_bytes"] = ev.number(a.get("tensor_size", 0), f"{at} tensor_size")
        else:  # the host side of a collective keeps its host time (ASTRA-sim refuses comm nodes on the CPU)
            cpu_comm = t in (COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE)
            tally = f"{NODE_TYPES[t]} (is_cpu_op)" if cpu_comm else NODE_TYPES.get(t, f"node type {t}")
            how.unknown[tally] = how.unknown.get(tally, 0) + 1
            if not cpu_comm:
                f["duration_s"] = 0.0
    if how.fabriclab:
        f.update({k: _extra(a[f"fabriclab_{k}"], k, at, how) for k in EXTRA_FIELDS if f"fabriclab_{k}" in a})
    if f["collective"] in ("send", "recv"):
        f["peer"] = ev.peer(f["peer"], f"{at} {'comm_dst' if f['collective'] == 'send' else 'comm_src'}",
                            how.num_ranks)
    if f["kind"] == "comm" and f["group_size"] > how.num_ranks:
        raise ValueError(f"{at} group size {f['group_size']:,}: more than the trace's {how.num_ranks:,} ranks; give "
                         f"--num-gpus for a trace of more ranks than its files")
    return f


# The largest collective or message a trace may carry: 1 PiB, as `simulate collective --size` takes.
MAX_COMM_BYTES = 1 << 50


def _extra(value, name: str, at: str, how: _Reading):
    """One `fabriclab_<name>` attribute's value, of the type its Op field has."""
    what = f"{at} fabriclab_{name}"
    kind = _EXTRA_KINDS[name]
    if kind == "double":
        return ev.number(value, what)
    if kind == "string":
        return ev.text(value, what)
    if name in ("group_size", "peer"):  # a comm op's are checked against the ranks by the caller
        return ev.whole(value, what, minimum=0 if name == "group_size" else -1, maximum=ev.MAX_TRACE_RANKS)
    return ev.whole(value, what, maximum=MAX_COMM_BYTES * ev.MAX_TRACE_RANKS)


def _collective(comm_type, how: _Reading) -> str:
    if comm_type in COLLECTIVE_OF:
        return COLLECTIVE_OF[comm_type]
    unknown = "COMM_COLL_NODE without comm_type" if comm_type is None else f"comm_type {comm_type}"
    name, ours = FOREIGN_COMM_TYPES.get(comm_type, (unknown, "allreduce"))
    if comm_type != 8:  # REDUCE_SCATTER_BLOCK is a reduce-scatter
        how.approximated[name] = how.approximated.get(name, 0) + 1
    return ours


def _group_size(pg: str, name: str, how: _Reading) -> int:
    if how.fabriclab:  # the communicator's group when the graph has it, else unknown (0)
        return len(how.groups[name]) if how.groups and name in how.groups else 0
    if how.groups and pg in how.groups:
        return len(how.groups[pg])
    return how.num_ranks  # "" and "0" are all ranks in ASTRA-sim; a group not given: all ranks too


def _deps(node: EtNode, fabriclab: bool) -> tuple[int, ...]:
    deps = node.data_deps
    if fabriclab:
        n = len(deps) - len(node.ctrl_deps)
        return deps[:n] if node.ctrl_deps and deps[n:] == node.ctrl_deps else deps
    return tuple(dict.fromkeys(deps))


def file_graph(et: EtFile, rank: int, num_ranks: int, how: _Reading) -> RankGraph:
    """The rank graph of one decoded file (`rank`, `num_ranks`: for a file fabriclab did not write)."""
    try:
        if how.fabriclab:
            rank, num_ranks, communicators, how = _fabriclab_metadata(et, how)
        else:
            communicators = {n: list(r) for n, r in how.groups.items() if rank in r} if how.groups else None
        ops = tuple(Op(**_op_fields(n.id, n.name, n.type, n.duration_micros, n.attrs, how),
                       deps=_deps(n, how.fabriclab)) for n in et.nodes)
        return RankGraph(rank=rank, num_ranks=num_ranks, ops=ops, communicators=communicators)
    except ValueError as exc:
        raise ValueError(f"{et.path}: {exc}") from None


def _fabriclab_metadata(et: EtFile, how: _Reading) -> tuple[int, int, dict | None, _Reading]:
    """(rank, rank count, communicators, the reading) from the GlobalMetadata of a file fabriclab wrote, each
    value typed and bounded."""
    num_ranks = ev.whole(et.meta("fabriclab_num_ranks"), "metadata fabriclab_num_ranks", minimum=1,
                         maximum=ev.MAX_TRACE_RANKS)
    rank = ev.whole(et.meta("fabriclab_rank"), "metadata fabriclab_rank", maximum=num_ranks - 1)
    revision = ev.whole(et.meta("fabriclab_graph"), "metadata fabriclab_graph", minimum=1)
    names = et.meta("fabriclab_communicators")
    names = None if names is None else ev.texts(names, "metadata fabriclab_communicators")
    communicators = None if names is None else {
        n: ev.ranks(et.meta(f"fabriclab_group.{n}", ()), f"metadata fabriclab_group.{n}", num_ranks) for n in names}
    pg_names = ev.texts(et.meta("fabriclab_pg_names", ()), "metadata fabriclab_pg_names")
    how = replace(how, num_ranks=num_ranks, groups=communicators, astra_sizes=revision >= 2,
                  pg_names=dict(zip(pg_names, names or ())))
    return rank, num_ranks, communicators, how


def et_paths(source) -> list[tuple[int, Path]]:
    """(rank, path) of the files `source` names: a prefix (`PREFIX.<rank>.et` files), one file, or a list of
    files; ranks from the names (`name.<rank>.et`), else the list position."""
    if isinstance(source, (list, tuple)):
        paths = [Path(p) for p in source]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise ValueError(f"no such trace file: {', '.join(missing)}")
    elif Path(source).is_file():
        paths = [Path(source)]
    else:
        prefix = Path(source)
        pattern = re.compile(re.escape(prefix.name) + r"\.(\d+)\.et(\.gz)?$")
        paths = [p for p in (prefix.parent.glob(f"{prefix.name}.*.et*") if prefix.parent.is_dir() else ())
                 if pattern.match(p.name)]
        if not paths:
            raise ValueError(f"{source}: no file {source} and no files {source}.<rank>.et; give a prefix such that "
                             f"{source}.0.et exists, or the trace files")
    found = [re.search(r"\.(\d+)\.et(\.gz)?$", p.name) for p in paths]
    ranks = [int(m.group(1)) for m in found] if all(found) else list(range(len(paths)))
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(paths)))
    return sorted(zip(ranks, paths))


def load_et(source, *, comm_groups: dict[str, list[int]] | None = None, num_ranks: int | None = None) -> EtImport:
    """Read the traces `source` names (see `et_paths`) into rank graphs. For traces that fabriclab did not
    write: `comm_groups`, ASTRA-sim's communicator groups (pg_name -> ranks, its `--comm-group-configuration`
    file); `num_ranks`, the job's ranks, which a group of all ranks has (default: one more than the highest
    rank among the files; one file of a 64-GPU job: 64)."""
    if comm_groups is not None:
        form = 'expected {"<pg_name>": [rank, ...], ...} as ASTRA-sim reads them'
        if not isinstance(comm_groups, dict):
            raise ValueError(f"communicator groups: {form}")
        try:
            comm_groups = {str(k): ev.ranks(v, f"group {k!r}", ev.MAX_TRACE_RANKS) for k, v in comm_groups.items()}
        except ValueError as exc:
            raise ValueError(f"communicator groups: {exc}; {form}") from None
    located = et_paths(source)
    highest = max(len(located), max(r for r, _ in located) + 1)
    if highest > ev.MAX_TRACE_RANKS:
        rank, path = max(located)
        raise ValueError(f"{path}: rank {rank:,} (from the file name) makes a trace of {highest:,} ranks; a trace "
                         f"here has at most {ev.MAX_TRACE_RANKS:,} (the library model's largest job): name the "
                         f"files <prefix>.<rank>.et with the ranks the job has")
    if num_ranks is not None and num_ranks < highest:
        raise ValueError(f"{num_ranks} ranks, but the trace has rank {highest - 1}: give at least {highest}")
    num_ranks = ev.whole(num_ranks or highest, "ranks of the trace", minimum=1, maximum=ev.MAX_TRACE_RANKS)
    graphs, unknown, approximated, ours = [], {}, {}, []
    total = 0
    for rank, path in located:
        et = read_et_file(path)
        total += len(et.nodes)
        if total > MAX_TRACE_NODES:
            raise ValueError(f"{path}: the trace passes {MAX_TRACE_NODES:,} nodes over its files here (about 150 s "
                             f"and 2.3 GB); give fewer ranks' files")
        how = _Reading(fabriclab=et.meta("fabriclab_graph") is not None, num_ranks=num_ranks, groups=comm_groups,
                       unknown=unknown, approximated=approximated)  # the tallies of all files together
        graphs.append(file_graph(et, rank, num_ranks, how))
        ours.append(how.fabriclab)
    return EtImport(graphs=graphs, paths=[p for _, p in located], fabriclab_written=all(ours),
                    unknown_nodes=unknown, approximated=approximated)


def read_et(source, *, comm_groups: dict[str, list[int]] | None = None,
            num_ranks: int | None = None) -> list[RankGraph]:
    """The rank graphs of the traces `source` names; a warning counts what did not map exactly."""
    got = load_et(source, comm_groups=comm_groups, num_ranks=num_ranks)
    if got.unknown_nodes or got.approximated:
        parts = [f"{n} {k} as compute" for k, n in got.unknown_nodes.items()]
        parts += [f"{n} {k} as the nearest collective" for k, n in got.approximated.items()]
        warnings.warn("Chakra trace read with approximations: " + "; ".join(parts), stacklevel=2)
    return got.graphs
