"""Chakra execution trace files (`.et`): the three protobuf messages, encoded and decoded.

Written from the published schema, with no `chakra` and no `protobuf` package (`workload/protowire.py`):
mlcommons/chakra `schema/protobuf/et_def.proto` as of commit 21585d8 (v1.0.0, 2026-05-20); the file has not
changed since a1120dd (2024-05-09), so traces of Chakra 0.0.4 (ASTRA-sim's examples) read the same, and it
is the `et_def.proto` of the ASTRA-sim build in `../shared/tools/astra-sim`. A file is what
`protolib.encodeMessage` writes: a varint-length-prefixed `GlobalMetadata` message, then one `Node` message
after another. What the nodes mean for fabriclab's rank graphs is `workload/chakra.py`.

Try it: `fabriclab chakra example --out /tmp/demo && python -c "from fabriclab.workload.etfile import
read_et_file; print(read_et_file('/tmp/demo.0.et').nodes[0])"`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from fabriclab.workload import protowire as pw

ET_VERSION = "0.0.4"  # the GlobalMetadata version of Chakra's tagged release, which ASTRA-sim's examples carry

# What one file may hold: a trace is untrusted input, and without bounds 16 MiB of zero bytes decoded as
# 16M empty nodes for minutes and 1.9 GB, and a 1 MB gzip of zeros decompressed to 1 GiB in memory. One rank
# of fabriclab's own GPT-3 175B export (64 GPUs, PP 8, 64 micro-batches) is 75,777 nodes in 12.9 MB, read
# into a rank graph in 2 s and ~40 MB here (~30 us and ~450 bytes a node): the bounds are 13x that.
MAX_ET_BYTES = 256 << 20
"""Bytes of one file, and of what a gzipped file decompresses to (checked as it decompresses)."""
MAX_ET_NODES = 1_000_000
"""Nodes of one file (~30 s and ~450 MB read into a rank graph here)."""
MAX_ET_VALUES = 16_000_000
"""Dependencies, attributes and list values of one file together: a byte of packed dependencies is one
entry of a tuple (8 to 36 bytes in memory), so bytes alone do not bound the memory."""

# et_def.proto's NodeType.
NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE", 4: "COMP_NODE",
              5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7

# AttributeProto's oneof: scalar kinds at fields 3, 5, ..., 31, their lists right after.
_SCALARS = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string", "bytes")
ATTR_FIELDS = {**{k: 3 + 2 * i for i, k in enumerate(_SCALARS)},
               **{k + "_list": 4 + 2 * i for i, k in enumerate(_SCALARS)}}
_KIND_OF = {v: k for k, v in ATTR_FIELDS.items()}
_FIXED = {"double": struct.Struct("<d"), "float": struct.Struct("<f"), "fixed32": struct.Struct("<I"),
          "fixed64": struct.Struct("<Q"), "sfixed32": struct.Struct("<i"), "sfixed64": struct.Struct("<q")}
_VARINT_KINDS = {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool"}


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
            if isinstance(found.value, tuple):  # a list: its values count against MAX_ET_VALUES once
                cache[_LIST_VALUES] = cache.get(_LIST_VALUES, 0) + len(found.value)
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


_LIST_VALUES = "list values"  # the key (a str among bytes keys) of a decode cache's count of list values


def read_file_bytes(path: Path, limit: int = MAX_ET_BYTES) -> bytes:
    """The bytes of `path`, gunzipped when it is a gzip file, at most `limit` of them: a ValueError names the
    file and the bound (a file larger, or a gzip that decompresses to more, is not read further)."""
    import zlib

    try:
        size = path.stat().st_size
        if size > limit:
            raise ValueError(f"{path}: {size:,} bytes; a trace file here holds at most {limit >> 20} MiB "
                             f"(split the trace, or give fewer ranks)")
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if data[:2] != b"\x1f\x8b":
        return data
    out, rest = [], data
    total = 0
    try:
        while rest[:2] == b"\x1f\x8b":  # gzip members one after another, as gzip.decompress reads them
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not inflate.eof:
                chunk = inflate.decompress(rest, limit + 1 - total)  # never more than the bound in memory
                total += len(chunk)
                out.append(chunk)
                if total > limit:
                    raise ValueError(f"{path}: decompresses to more than {limit >> 20} MiB, the most a trace "
                                     f"file here holds (split the trace)")
                rest = inflate.unconsumed_tail
                if not chunk and not rest:
                    raise ValueError(f"{path}: a gzip file that does not decompress (it ends early: truncated)")
            rest = inflate.unused_data
    except zlib.error as exc:
        raise ValueError(f"{path}: a gzip file that does not decompress ({exc})") from None
    return b"".join(out)


def read_et_file(path: Path | str) -> EtFile:
    """Decode one `.et` file (gzipped too, as protolib opens them); a ValueError names the file and byte
    offset where it is not a Chakra trace, or the bound it passes (MAX_ET_BYTES, MAX_ET_NODES,
    MAX_ET_VALUES)."""
    path = Path(path)
    data = read_file_bytes(path)
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
        nodes = _decode_nodes(path, data, messages, sum(len(a.value) for a in metadata if isinstance(a.value, tuple)))
    except pw.WireError as exc:
        raise ValueError(f"{path}: not a Chakra execution trace ({exc})") from None
    return EtFile(path=path, version=version, metadata=tuple(metadata), nodes=nodes)


def _decode_nodes(path: Path, data: bytes, messages, values: int) -> tuple[EtNode, ...]:
    """The nodes of the messages, stopped with a ValueError at MAX_ET_NODES or MAX_ET_VALUES."""
    cache: dict = {}
    nodes = []
    for a, b in messages:
        if len(nodes) == MAX_ET_NODES:
            raise ValueError(f"{path}: more than {MAX_ET_NODES:,} nodes, the most a trace file here holds (about "
                             f"30 s and 450 MB to read); split the trace")
        node = decode_node(data, a, b, cache)
        values += len(node.data_deps) + len(node.ctrl_deps) + len(node.attrs)
        if values + cache.get(_LIST_VALUES, 0) > MAX_ET_VALUES:
            raise ValueError(f"{path}: more than {MAX_ET_VALUES:,} dependencies, attributes and list values by "
                             f"node {node.id} (the {len(nodes) + 1:,}th), the most a trace file here holds")
        nodes.append(node)
    return tuple(nodes)


def write_et_file(path: Path | str, nodes, *, version: str = ET_VERSION, metadata=()) -> Path:
    """Write a GlobalMetadata message and `nodes` (EtNode), each length-prefixed, to `path`."""
    cache: dict = {}
    chunks = [pw.delimited(encode_metadata(version, metadata)), *(pw.delimited(encode_node(n, cache)) for n in nodes)]
    Path(path).write_bytes(b"".join(chunks))
    return Path(path)
