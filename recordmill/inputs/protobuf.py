"""The protobuf wire format, read and written by hand: enough for the record formats that hold
protobuf messages (TFRecord's ``tf.train.Example``, OneFlow's ``OFRecord``, caffe2's
``TensorProtos``), without protobuf or the tools' generated classes.

A message is a sequence of fields: a varint key (``number << 3 | wire type``), then a varint
(wire type 0), 8 bytes (1), a varint length and that many bytes (2), or 4 bytes (5).
"""

from __future__ import annotations

from collections.abc import Iterator


class ProtobufError(ValueError):
    """A message that does not follow the wire format (cut short, or an unknown wire type)."""


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    try:
        while True:
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise ProtobufError("the message ends inside a varint") from None


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message; value is an int (wire type 0) or bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:  # no message has a field 0: zeroed or damaged bytes
            raise ProtobufError("a field numbered 0 (damaged bytes)")
        if wire == 0:
            value, pos = varint(buf, pos)
            yield number, wire, value
            continue
        if wire == 2:
            size, pos = varint(buf, pos)
        elif wire == 5:
            size = 4
        elif wire == 1:
            size = 8
        else:
            raise ProtobufError(f"field {number} has wire type {wire}, which is not supported")
        if pos + size > end:
            raise ProtobufError(f"field {number} runs past the end of the message")
        yield number, wire, buf[pos : pos + size]
        pos += size


def packed_varints(buf: bytes) -> list[int]:
    """The varints of a packed repeated field, in order."""
    values, pos = [], 0
    while pos < len(buf):
        value, pos = varint(buf, pos)
        values.append(value)
    return values


def signed(value: int) -> int:
    """An int64 / int32 field's value (negative numbers are sent as 64-bit two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def message(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): a nested message, bytes, a string or packed values."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload
