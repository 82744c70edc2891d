"""The protobuf wire format, as much of it as a Chakra execution trace needs, without the protobuf package.

A protobuf message is a sequence of fields; each starts with a varint key `field_number << 3 | wire_type`.
Wire types (https://protobuf.dev/programming-guides/encoding/): 0 VARINT (int32, int64, uint32, uint64,
bool, enum; sint32/sint64 zigzag-encoded), 1 I64 (fixed64, sfixed64, double), 2 LEN (string, bytes,
messages, packed repeated scalars), 5 I32 (fixed32, sfixed32, float); 3 and 4 (groups) are deprecated and
refused. A varint holds 7 bits per byte, least significant group first, the top bit set on all bytes but
the last; a negative int32/int64 is written as its 64-bit two's complement (10 bytes).

A file of messages is what Chakra's `protolib.encodeMessage` writes (mlcommons/chakra,
src/third_party/utils/protolib.py): each message prefixed by its length as a varint.

Decoding works on one `bytes` object with absolute positions, so an error names the byte offset in the
file; a `WireError` (a ValueError) carries that offset.

Try it: `python -c "from fabriclab.workload.protowire import *; b = field_varint(1, 300);
print(b.hex(), list(iter_fields(b)))"`.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5
_U64 = 1 << 64
_DOUBLE = struct.Struct("<d")
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


class WireError(ValueError):
    """Bytes that are not protobuf wire format; `offset` is where decoding stopped."""

    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at byte {offset}")
        self.offset = offset


def encode_varint(value: int) -> bytes:
    """`value` (0 <= value < 2**64, or a negative int64 written as its two's complement) as a varint."""
    if value < 0:
        value += _U64
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`; a WireError if it runs past `end` or 10 bytes."""
    end = len(data) if end is None else end
    if pos < end:
        b = data[pos]
        if b < 0x80:  # the common one-byte case, without the loop
            return b, pos + 1
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise WireError("truncated varint", start)
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes", start)


def to_signed(value: int, bits: int = 64) -> int:
    """A varint's unsigned value read as a two's-complement int64 (or int32 with bits=32)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def zigzag_decode(value: int) -> int:
    """sint32/sint64: 0, -1, 1, -2, ... are stored as 0, 1, 2, 3, ..."""
    return (value >> 1) ^ -(value & 1)


@functools.lru_cache(maxsize=None)
def key(field_number: int, wire_type: int) -> bytes:
    """The varint that starts a field."""
    return encode_varint(field_number << 3 | wire_type)


def field_varint(field_number: int, value: int) -> bytes:
    """A VARINT field (int32/int64/uint64/bool/enum; a negative value as 64-bit two's complement)."""
    return key(field_number, VARINT) + encode_varint(int(value))


def field_len(field_number: int, payload: bytes) -> bytes:
    """A LEN field: a string's UTF-8, bytes, an embedded message or a packed list."""
    return key(field_number, LEN) + encode_varint(len(payload)) + payload


def field_string(field_number: int, text: str) -> bytes:
    return field_len(field_number, text.encode("utf-8"))


def field_double(field_number: int, value: float) -> bytes:
    return key(field_number, I64) + _DOUBLE.pack(value)


def field_packed_varints(field_number: int, values: Iterable[int]) -> bytes:
    """A packed repeated varint field (proto3's default for repeated scalars); empty lists write nothing."""
    payload = b"".join(encode_varint(int(v)) for v in values)
    return field_len(field_number, payload) if payload else b""


def iter_fields(data: bytes, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int, object, int]]:
    """(field number, wire type, value, offset of the key) of each field in `data[pos:end]`. The value is an
    int for VARINT, the raw 8 or 4 bytes for I64/I32, and (start, stop) positions into `data` for LEN, so
    an embedded message is decoded in place without a copy."""
    end = len(data) if end is None else end
    while pos < end:
        at = pos
        k, pos = decode_varint(data, pos, end)
        number, wire = k >> 3, k & 7
        if number == 0:
            raise WireError("field number 0 (not a protobuf message)", at)
        if wire == VARINT:
            value, pos = decode_varint(data, pos, end)
        elif wire == LEN:
            size, pos = decode_varint(data, pos, end)
            if pos + size > end:
                raise WireError(f"field {number}: length {size} runs past the end of its message", at)
            value, pos = (pos, pos + size), pos + size
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            if pos + width > end:
                raise WireError(f"field {number}: truncated fixed-width value", at)
            value, pos = data[pos:pos + width], pos + width
        else:
            raise WireError(f"field {number}: wire type {wire} is not one of 0, 1, 2, 5", at)
        yield number, wire, value, at


def packed_varints(data: bytes, start: int, stop: int) -> list[int]:
    """The values of a packed repeated varint field whose payload is `data[start:stop]`."""
    out = []
    pos = start
    while pos < stop:
        value = data[pos]
        if value < 0x80:
            pos += 1
        else:
            value, pos = decode_varint(data, pos, stop)
        out.append(value)
    return out


def iter_delimited(data: bytes, pos: int = 0) -> Iterator[tuple[int, int]]:
    """(start, stop) of each length-prefixed message in `data` (Chakra's protolib file layout)."""
    end = len(data)
    while pos < end:
        at = pos
        size, pos = decode_varint(data, pos, end)
        if pos + size > end:
            raise WireError(f"message of {size} bytes runs past the end of the file ({end - pos} left)", at)
        yield pos, pos + size
        pos += size


def delimited(message: bytes) -> bytes:
    """`message` with its length prefixed as a varint (protolib's encodeMessage)."""
    return encode_varint(len(message)) + message
