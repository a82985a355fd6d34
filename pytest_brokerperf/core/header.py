"""The 32-byte header the harness writes at the start of every payload.

It carries what end-to-end accounting needs (docs/explanation/measurement.md):
producer id and sequence
(delivery accounting), the intended send time (coordinated-omission corrected views)
and the actual send time (OMB-compatible views), both CLOCK_MONOTONIC nanoseconds.
Putting it in the payload keeps message size equal to ``messageSize`` on every broker
(Kafka headers, Pulsar properties and AMQP headers would each add different bytes).
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["HEADER", "HEADER_SIZE", "KIND_DATA", "KIND_PROBE", "MAGIC", "VERSION", "numpy_dtype",
           "pack", "unpack"]

MAGIC = 0xB7EF
VERSION = 1
KIND_DATA = 0
KIND_PROBE = 1

#: magic u16, version u8, kind u8, producer id u32, sequence i64, intended ns i64, sent ns i64
HEADER = struct.Struct("<HBBIqqq")
HEADER_SIZE = HEADER.size
assert HEADER_SIZE == 32

pack = HEADER.pack
unpack = HEADER.unpack_from


def numpy_dtype() -> Any:
    """The header as a packed numpy record (same little-endian layout as :data:`HEADER`):
    the batch paths read and write thousands of headers per call with it."""
    import numpy as np

    return np.dtype([("magic", "<u2"), ("version", "u1"), ("kind", "u1"), ("pid", "<u4"),
                     ("seq", "<i8"), ("intended", "<i8"), ("sent", "<i8")])
