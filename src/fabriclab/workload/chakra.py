"""Chakra execution traces (the per-rank `.et` files ASTRA-sim reads) to and from fabriclab's rank graphs.

Written from the published schema, with no `chakra` and no `protobuf` package (`workload/protowire.py`):
mlcommons/chakra `schema/protobuf/et_def.proto` as of commit 21585d8 (v1.0.0, 2026-05-20); the file has not
changed since a1120dd (2024-05-09), so traces of Chakra 0.0.4 (ASTRA-sim's examples) read the same. A file
is what `protolib.encodeMessage` writes: a varint-length-prefixed `GlobalMetadata` message, then one `Node`
message after another; one file per rank, `<prefix>.<rank>.et`, the name ASTRA-sim opens
(astra-sim/workload/Workload.cc: `et_filename + "." + to_string(sys->id) + ".et"`).

Mapping (attribute names and value types as Chakra's feeder reads them, src/feeder/et_feeder_node.cpp):
- compute op -> COMP_NODE: `duration_micros` (rounded), `num_ops` (int64, the FLOPs), `is_cpu_op` false;
  no `tensor_size` (an op carries no memory bytes), so run ASTRA-sim in replay mode: its roofline mode
  skips nodes without one.
- collective -> COMM_COLL_NODE: `comm_type` (int64, CollectiveCommType), `comm_size` (int64 bytes),
  `pg_name`. ASTRA-sim reads `pg_name` as an integer id of a group in its `--comm-group-configuration`
  file ("" or "0": all ranks). When the graphs carry their communicator groups, each distinct group
  gets an id from 1 and `write_et` writes that file as `<prefix>.comm_groups.json`; otherwise
  `pg_name` is the communicator's name. ASTRA-sim simulates ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER,
  ALL_TO_ALL and BROADCAST (replayed from its duration); REDUCE and BARRIER are written as the schema
  numbers them, and ASTRA-sim stops at them.
- send / recv -> COMM_SEND_NODE / COMM_RECV_NODE with `comm_src`, `comm_dst`, `comm_tag` (int32) and
  `comm_size`; the k-th send from a to b and the k-th receive at b from a share tag k (posted order).
- Dependencies -> `data_deps`, in order. Stream order: an op whose previous op on its stream (in
  topological order, as `RankGraph.critical_path_s` takes them) is not among its dependencies gets
  that op appended to `data_deps`, because ASTRA-sim's feeder waits on `data_deps` (chakra
  et_feeder.cpp), and listed alone in `ctrl_deps` to mark the edge as the stream's; the reader takes
  it off again. So ASTRA-sim runs the ops in fabriclab's order, and a round trip is exact.
- What the standard fields cannot hold goes into `fabriclab_*` attributes, only where needed: the exact
  seconds and FLOPs where `duration_micros` and `num_ops` round them, a group size, stream or communicator
  other than the node type and the groups imply; the GlobalMetadata holds the rank, the rank count, and
  each communicator's ranks and pg_name.

A trace fabriclab did not write (no `fabriclab_graph` in its GlobalMetadata) is read from the standard
fields: durations, `num_ops`, comm types and sizes (`comm_size`, else `tensor_size`), `pg_name` (else
"world"); group sizes from a communicator-group file when given, else the number of ranks; compute on
the `compute` stream, communication on `comm` (ASTRA-sim runs one GPU computation and one communication
at a time, astra-sim/workload/HardwareResource.cc); `ctrl_deps` are ignored (Chakra's PyTorch converter
puts the enclosing CPU op there). Other node types (MEM_LOAD, METADATA, ...) become zero-time compute
ops, comm nodes marked `is_cpu_op` compute ops of their host time; `EtImport.unknown_nodes` counts both.

Try it: `fabriclab chakra example --out /tmp/demo && fabriclab chakra show /tmp/demo`.
"""

from __future__ import annotations

import gzip
import json
import re
import struct
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from fabriclab.workload import protowire as pw
from fabriclab.workload.graph import Op, RankGraph, topological

ET_VERSION = "0.0.4"  # the GlobalMetadata version of Chakra's tagged release, which ASTRA-sim's examples carry
FORMAT_REVISION = 1  # `fabriclab_graph` in the GlobalMetadata: how fabriclab laid out its attributes

# et_def.proto's NodeType and CollectiveCommType.
NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE", 4: "COMP_NODE",
              5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
COMM_TYPES = {"allreduce": 0, "reduce": 1, "allgather": 2, "broadcast": 5, "alltoall": 6, "reduce_scatter": 7,
              "barrier": 9}
# Comm types with no collective of ours: read as the nearest one (GATHER / SCATTER move at most the
# bytes of an all-gather / broadcast of the same buffer), counted in EtImport.approximated.
FOREIGN_COMM_TYPES = {3: ("GATHER", "allgather"), 4: ("SCATTER", "broadcast"),
                      8: ("REDUCE_SCATTER_BLOCK", "reduce_scatter")}
COLLECTIVE_OF = {v: k for k, v in COMM_TYPES.items()}

# AttributeProto's oneof: scalar kinds at fields 3, 5, ..., 31, their lists right after.
_SCALARS = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string", "bytes")
ATTR_FIELDS = {**{k: 3 + 2 * i for i, k in enumerate(_SCALARS)},
               **{k + "_list": 4 + 2 * i for i, k in enumerate(_SCALARS)}}
_KIND_OF = {v: k for k, v in ATTR_FIELDS.items()}
_FIXED = {"double": struct.Struct("<d"), "float": struct.Struct("<f"), "fixed32": struct.Struct("<I"),
          "fixed64": struct.Struct("<Q"), "sfixed32": struct.Struct("<i"), "sfixed64": struct.Struct("<q")}
_VARINT_KINDS = {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool"}
# Op fields that `fabriclab_<field>` attributes carry where the standard fields do not.
EXTRA_FIELDS = ("duration_s", "flops", "communicator", "collective", "size_bytes", "group_size", "peer", "stream")


class EtAttr(NamedTuple):
    """One AttributeProto: a name and one typed value (a named tuple, not a dataclass: a trace has millions,
    and a tuple is built and hashed several times faster)."""

    name: str
    kind: str
    """The oneof member: `int64`, `double`, `string`, `bool`, `int64_list`, ... (see ATTR_FIELDS)."""
    value: object


@dataclass(frozen=True, kw_only=True)
class EtNode:
    """One Node message (inputs and outputs, the IOInfo strings, are skipped)."""

    id: int
    name: str = ""
    type: int = COMP_NODE
    """A NodeType number (NODE_TYPES)."""
    ctrl_deps: tuple[int, ...] = ()
    data_deps: tuple[int, ...] = ()
    start_time_micros: int = 0
    duration_micros: int = 0
    attrs: tuple[EtAttr, ...] = ()

    def attr(self, name: str, default: object = None) -> object:
        """The value of the attribute `name`, else `default`."""
        return next((a.value for a in self.attrs if a.name == name), default)


@dataclass(frozen=True, kw_only=True)
class EtFile:
    """One decoded `.et` file."""

    path: Path
    version: str
    metadata: tuple[EtAttr, ...]
    nodes: tuple[EtNode, ...]

    def meta(self, name: str, default: object = None) -> object:
        return next((a.value for a in self.metadata if a.name == name), default)


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


# ---- the wire format of the three messages --------------------------------------------------------

def _encode_attr(a: EtAttr, field_number: int = 10) -> bytes:
    """The attribute as field `field_number` (Node.attr is 10, GlobalMetadata.attr 2)."""
    number = ATTR_FIELDS.get(a.kind)
    if a.kind in ("int32", "int64", "uint32", "uint64", "bool"):
        value = pw.field_varint(number, int(a.value))
    elif a.kind == "double":
        value = pw.field_double(number, float(a.value))
    elif a.kind == "string":
        value = pw.field_string(number, str(a.value))
    elif a.kind in ("int64_list", "uint64_list"):
        value = pw.field_len(number, pw.field_packed_varints(1, a.value))
    elif a.kind == "string_list":
        value = pw.field_len(number, b"".join(pw.field_string(1, s) for s in a.value))
    else:
        raise ValueError(f"attribute {a.name!r}: writing kind {a.kind!r} is not supported; use int64, uint64, "
                         f"int32, bool, double, string, int64_list or string_list")
    return pw.field_len(field_number, pw.field_string(1, a.name) + value)


def encode_node(node: EtNode, cache: dict | None = None) -> bytes:
    """The Node message, fields in number order and proto3 defaults left out, as protobuf writes it.
    `cache` (a dict kept across the nodes of a file) holds encoded scalar attributes, which repeat."""
    parts = [pw.field_varint(1, node.id) if node.id else b"", pw.field_string(2, node.name) if node.name else b"",
             pw.field_varint(3, node.type) if node.type else b"", pw.field_packed_varints(4, node.ctrl_deps),
             pw.field_packed_varints(5, node.data_deps),
             pw.field_varint(6, node.start_time_micros) if node.start_time_micros else b"",
             pw.field_varint(7, node.duration_micros) if node.duration_micros else b""]
    cache = {} if cache is None else cache
    for a in node.attrs:
        if a.kind.endswith("_list"):
            parts.append(_encode_attr(a))
            continue
        encoded = cache.get(a)
        if encoded is None:
            encoded = cache[a] = _encode_attr(a)
        parts.append(encoded)
    return b"".join(parts)


def encode_metadata(version: str, attrs: tuple[EtAttr, ...] | list[EtAttr] = ()) -> bytes:
    """The GlobalMetadata message."""
    return (pw.field_string(1, version) if version else b"") + b"".join(_encode_attr(a, 2) for a in attrs)


def _expect(wire: int, want: int, what: str, at: int) -> None:
    if wire != want:
        raise pw.WireError(f"{what} has wire type {wire}, the schema says {want}", at)


def _text(data: bytes, span: tuple[int, int], at: int) -> str:
    try:
        return data[span[0]:span[1]].decode("utf-8")
    except UnicodeDecodeError:
        raise pw.WireError("a string field is not UTF-8", at) from None


def _scalar(kind: str, wire: int, value, data: bytes, at: int):
    if kind in _VARINT_KINDS:
        _expect(wire, pw.VARINT, f"a {kind} attribute", at)
        if kind == "int64":
            return pw.to_signed(value)
        if kind == "int32":
            return pw.to_signed(value, 32)
        if kind in ("sint32", "sint64"):
            return pw.zigzag_decode(value)
        return bool(value) if kind == "bool" else value & (0xFFFFFFFF if kind == "uint32" else ~0)
    if kind in _FIXED:
        _expect(wire, pw.I64 if _FIXED[kind].size == 8 else pw.I32, f"a {kind} attribute", at)
        return _FIXED[kind].unpack(value)[0]
    _expect(wire, pw.LEN, f"a {kind} attribute", at)
    return _text(data, value, at) if kind == "string" else data[value[0]:value[1]]


def _decode_attr(data: bytes, start: int, stop: int, cache: dict | None = None) -> EtAttr:
    """The AttributeProto in `data[start:stop]`; `cache` (raw bytes -> attribute) skips repeats."""
    if cache is not None:
        raw = data[start:stop]
        found = cache.get(raw)
        if found is None:
            found = cache[raw] = _decode_attr(data, start, stop)
        return found
    name, kind, value = "", "", None
    for number, wire, v, at in pw.iter_fields(data, start, stop):
        if number == 1:
            _expect(wire, pw.LEN, "AttributeProto.name", at)
            name = _text(data, v, at)
        elif number in _KIND_OF:
            kind = _KIND_OF[number]
            if kind.endswith("_list"):
                _expect(wire, pw.LEN, f"a {kind} attribute", at)
                value = tuple(_decode_list(kind[:-5], data, v))
            else:
                value = _scalar(kind, wire, v, data, at)
    return EtAttr(name, kind, value)


def _decode_list(kind: str, data: bytes, span: tuple[int, int]) -> list:
    out: list = []
    for _, wire, v, at in pw.iter_fields(data, *span):
        if wire == pw.LEN and (kind in _VARINT_KINDS or kind in _FIXED):  # packed
            if kind in _VARINT_KINDS:
                out += [_scalar(kind, pw.VARINT, x, data, at) for x in pw.packed_varints(data, *v)]
            else:
                out += [x[0] for x in _FIXED[kind].iter_unpack(data[v[0]:v[1]])]
        else:
            out.append(_scalar(kind, wire, v, data, at))
    return out


def decode_node(data: bytes, start: int, stop: int, cache: dict | None = None) -> EtNode:
    """The Node message in `data[start:stop]`; unknown fields are skipped (see `_decode_attr` for `cache`).
    Written out field by field rather than through `iter_fields`: it runs once per op."""
    varint = pw.decode_varint
    node_id = node_type = start_us = duration_us = 0
    name = ""
    ctrl, deps, attrs = [], [], []
    pos = start
    while pos < stop:
        at = pos
        k = data[pos]  # keys and most lengths are one byte: skip the call then
        k, pos = (k, pos + 1) if k < 0x80 else varint(data, pos, stop)
        number, wire = k >> 3, k & 7
        if wire == pw.LEN:
            size = data[pos] if pos < stop else 0x80
            size, pos = (size, pos + 1) if size < 0x80 else varint(data, pos, stop)
            end = pos + size
            if end > stop:
                raise pw.WireError(f"Node field {number}: length {size} runs past the end of the node", at)
            if number == 10:
                attrs.append(_decode_attr(data, pos, end, cache))
            elif number == 2:
                name = _text(data, (pos, end), at)
            elif number == 5:
                deps += pw.packed_varints(data, pos, end)
            elif number == 4:
                ctrl += pw.packed_varints(data, pos, end)
            elif number in (1, 3, 6, 7):
                _expect(wire, pw.VARINT, f"Node field {number}", at)
            pos = end
        elif wire == pw.VARINT:
            v, pos = varint(data, pos, stop)
            if number == 1:
                node_id = v
            elif number == 3:
                node_type = v
            elif number == 7:
                duration_us = v
            elif number == 6:
                start_us = v
            elif number in (4, 5):  # an unpacked repeated field
                (ctrl if number == 4 else deps).append(v)
            elif number in (2, 8, 9, 10):
                _expect(wire, pw.LEN, f"Node field {number}", at)
        elif wire in (pw.I64, pw.I32):
            if number <= 10:
                raise pw.WireError(f"Node field {number} has wire type {wire}, the schema says "
                                   f"{pw.VARINT if number in (1, 3, 6, 7) else pw.LEN}", at)
            pos += 8 if wire == pw.I64 else 4
            if pos > stop:
                raise pw.WireError(f"Node field {number}: truncated fixed-width value", at)
        else:
            raise pw.WireError(f"field {number}: wire type {wire} is not one of 0, 1, 2, 5", at)
        if number == 0:
            raise pw.WireError("field number 0 (not a protobuf message)", at)
    return EtNode(id=node_id, name=name, type=node_type, ctrl_deps=tuple(ctrl), data_deps=tuple(deps),
                  start_time_micros=start_us, duration_micros=duration_us, attrs=tuple(attrs))


def read_et_file(path: Path | str) -> EtFile:
    """Decode one `.et` file (gzipped too, as protolib opens them); a ValueError names the file and byte
    offset where it is not a Chakra trace."""
    path = Path(path)
    data = path.read_bytes()
    try:
        data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    except (OSError, EOFError) as exc:
        raise ValueError(f"{path}: a gzip file that does not decompress ({exc})") from None
    if not data:
        raise ValueError(f"{path}: empty file, not a Chakra execution trace")
    try:
        messages = pw.iter_delimited(data)
        start, stop = next(messages)
        version, metadata = "", []
        for number, wire, v, at in pw.iter_fields(data, start, stop):
            if number in (1, 2):
                _expect(wire, pw.LEN, f"GlobalMetadata field {number}", at)
                if number == 1:
                    version = _text(data, v, at)
                else:
                    metadata.append(_decode_attr(data, *v))
        cache: dict = {}
        nodes = tuple(decode_node(data, a, b, cache) for a, b in messages)
    except pw.WireError as exc:
        raise ValueError(f"{path}: not a Chakra execution trace ({exc})") from None
    return EtFile(path=path, version=version, metadata=tuple(metadata), nodes=nodes)


def write_et_file(path: Path | str, nodes, *, version: str = ET_VERSION, metadata=()) -> Path:
    """Write a GlobalMetadata message and `nodes` (EtNode), each length-prefixed, to `path`."""
    cache: dict = {}
    chunks = [pw.delimited(encode_metadata(version, metadata)), *(pw.delimited(encode_node(n, cache)) for n in nodes)]
    Path(path).write_bytes(b"".join(chunks))
    return Path(path)


# ---- rank graphs to nodes -------------------------------------------------------------------------

_EXTRA_KINDS = {"duration_s": "double", "flops": "double", "communicator": "string", "collective": "string",
                "stream": "string", "size_bytes": "int64", "group_size": "int64", "peer": "int64"}
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
    unknown: dict[str, int] = field(default_factory=dict)
    approximated: dict[str, int] = field(default_factory=dict)


def comm_groups_path(prefix: Path | str) -> Path:
    """Where `write_et` puts ASTRA-sim's communicator-group file for `prefix`."""
    return Path(f"{prefix}.comm_groups.json")


def write_et(graphs: list[RankGraph], prefix: Path | str) -> list[Path]:
    """Write one `<prefix>.<rank>.et` per graph (and `<prefix>.comm_groups.json` when the graphs carry
    their communicator groups); returns the `.et` paths in the order of `graphs`."""
    if not graphs:
        raise ValueError("write_et: no graphs to write; give at least one RankGraph")
    ranks = [g.rank for g in graphs]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise ValueError(f"write_et: ranks {twice} appear more than once; give one graph per rank")
    bad = [op.id for g in graphs for op in g.ops if op.id < 0][:3]
    if bad:
        raise ValueError(f"write_et: op ids {bad} are negative; a Chakra node id is a uint64, renumber from 0")
    groups = _group_ids(graphs)
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for g in graphs:
        pg = {name: str(groups[(name, tuple(r))]) for name, r in (g.communicators or {}).items()}
        paths.append(write_et_file(f"{prefix}.{g.rank}.et", graph_nodes(g, pg), metadata=graph_metadata(g, pg)))
    if groups:
        lines = [f'  "{i}": {json.dumps(list(members))}' for (_, members), i in groups.items()]
        comm_groups_path(prefix).write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return paths


def _group_ids(graphs: list[RankGraph]) -> dict[tuple[str, tuple[int, ...]], int]:
    """(communicator, its ranks) -> ASTRA-sim group id from 1, the same on every rank."""
    found = {(name, tuple(ranks)) for g in graphs for name, ranks in (g.communicators or {}).items()}
    return {key: i for i, key in enumerate(sorted(found), start=1)}


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
        attrs.append(EtAttr("num_ops", "int64", min(round(op.flops), _INT64_MAX)))
    elif op.collective in ("send", "recv"):
        send = op.collective == "send"
        node_type = COMM_SEND_NODE if send else COMM_RECV_NODE
        src, dst = (rank, op.peer) if send else (op.peer, rank)
        attrs += [EtAttr("comm_src", "int32", src), EtAttr("comm_dst", "int32", dst),
                  EtAttr("comm_tag", "int32", tag), EtAttr("comm_size", "int64", int(op.size_bytes))]
    else:
        node_type = COMM_COLL_NODE
        attrs += [EtAttr("comm_type", "int64", COMM_TYPES[op.collective]),
                  EtAttr("comm_size", "int64", int(op.size_bytes))]
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
    """The Op keyword arguments of a node (without deps), from its standard fields, then fabriclab's."""
    a = {x.name: x.value for x in attrs}
    f = {"id": node_id, "name": name, "kind": "comm", "duration_s": micros / 1e6, "flops": 0.0, "communicator": "",
         "collective": "", "size_bytes": 0, "group_size": 0, "peer": -1, "stream": "comm"}
    if t in (COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE) and not (a.get("is_cpu_op") and not how.fabriclab):
        f["size_bytes"] = int(a.get("comm_size", a.get("tensor_size", 0)))
        if t == COMM_COLL_NODE:
            f["collective"] = _collective(a.get("comm_type"), how)
        else:
            f["collective"] = "send" if t == COMM_SEND_NODE else "recv"
            f["peer"] = int(a.get("comm_dst" if t == COMM_SEND_NODE else "comm_src", -1))
        pg = str(a.get("pg_name", ""))
        communicator = how.pg_names.get(pg, pg) if how.fabriclab else pg or "world"
        f["communicator"], f["group_size"] = communicator, _group_size(pg, communicator, how)
    else:
        f["kind"], f["stream"] = "compute", "compute"
        if t == COMP_NODE:
            f["flops"] = float(a.get("num_ops", 0))
        else:  # the host side of a collective keeps its host time (ASTRA-sim refuses comm nodes on the CPU)
            cpu_comm = t in (COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE)
            tally = f"{NODE_TYPES[t]} (is_cpu_op)" if cpu_comm else NODE_TYPES.get(t, f"node type {t}")
            how.unknown[tally] = how.unknown.get(tally, 0) + 1
            if not cpu_comm:
                f["duration_s"] = 0.0
    if how.fabriclab:
        f.update({k: a[f"fabriclab_{k}"] for k in EXTRA_FIELDS if f"fabriclab_{k}" in a})
    return f


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
    names = et.meta("fabriclab_communicators") if how.fabriclab else None
    if how.fabriclab:
        rank, num_ranks = int(et.meta("fabriclab_rank")), int(et.meta("fabriclab_num_ranks"))
        communicators = None if names is None else {n: list(et.meta(f"fabriclab_group.{n}", ())) for n in names}
        how = replace(how, groups=communicators, pg_names=dict(zip(et.meta("fabriclab_pg_names", ()), names or ())))
    else:
        communicators = {n: list(r) for n, r in how.groups.items() if rank in r} if how.groups else None
    try:
        ops = tuple(Op(**_op_fields(n.id, n.name, n.type, n.duration_micros, n.attrs, how),
                       deps=_deps(n, how.fabriclab)) for n in et.nodes)
        return RankGraph(rank=rank, num_ranks=num_ranks, ops=ops, communicators=communicators)
    except ValueError as exc:
        raise ValueError(f"{et.path}: {exc}") from None


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


def load_et(source, *, comm_groups: dict[str, list[int]] | None = None) -> EtImport:
    """Read the traces `source` names (see `et_paths`) into rank graphs. `comm_groups`: ASTRA-sim's
    communicator groups (pg_name -> ranks, its `--comm-group-configuration` file), for traces that
    fabriclab did not write."""
    if comm_groups is not None and not (isinstance(comm_groups, dict) and all(
            isinstance(v, list) and all(isinstance(r, int) for r in v) for v in comm_groups.values())):
        raise ValueError('communicator groups: expected {"<pg_name>": [rank, ...], ...} as ASTRA-sim reads them')
    located = et_paths(source)
    num_ranks = max(len(located), max(r for r, _ in located) + 1)
    graphs, unknown, approximated, ours = [], {}, {}, []
    for rank, path in located:
        et = read_et_file(path)
        how = _Reading(fabriclab=et.meta("fabriclab_graph") is not None, num_ranks=num_ranks, groups=comm_groups,
                       unknown=unknown, approximated=approximated)  # the tallies of all files together
        graphs.append(file_graph(et, rank, num_ranks, how))
        ours.append(how.fabriclab)
    return EtImport(graphs=graphs, paths=[p for _, p in located], fabriclab_written=all(ours),
                    unknown_nodes=unknown, approximated=approximated)


def read_et(source, *, comm_groups: dict[str, list[int]] | None = None) -> list[RankGraph]:
    """The rank graphs of the traces `source` names; a warning counts what did not map exactly."""
    got = load_et(source, comm_groups=comm_groups)
    if got.unknown_nodes or got.approximated:
        parts = [f"{n} {k} as compute" for k, n in got.unknown_nodes.items()]
        parts += [f"{n} {k} as the nearest collective" for k, n in got.approximated.items()]
        warnings.warn("Chakra trace read with approximations: " + "; ".join(parts), stacklevel=2)
    return got.graphs

