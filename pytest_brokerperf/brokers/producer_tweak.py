"""Producer settings a study case sweeps, in words every broker kind maps to its clients.

A :class:`ProducerTweak` is what a broker applies to its driver file's producer block
(:meth:`~pytest_brokerperf.brokers.base.BrokerType.tweak_driver_file`), so it lives with the
brokers: a study case (:mod:`pytest_brokerperf.scenario_library.study_cases`) carries
one, a broker never needs to know the case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["COMPRESSIONS", "SEND_MODES", "ProducerTweak", "size_id"]

COMPRESSIONS: Final = ("none", "lz4", "zstd", "snappy", "gzip")
SEND_MODES: Final = ("async", "sync")


def size_id(n: int) -> str:
    """``128B``, ``1KiB``, ``512KiB``, ``1GiB``: exact binary units for ids."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


@dataclass(frozen=True)
class ProducerTweak:
    """Producer settings a case sweeps, applied to the driver file's producer block.

    ``batch_bytes`` (Kafka ``batch.size``, Pulsar ``batchingMaxBytes``), ``linger_ms``
    (``linger.ms``, ``batchingMaxPublishDelayMs``), ``compression`` (``compression.type``,
    ``compressionType``) and ``send_mode`` (``sync``: one message outstanding, batching
    off, as pulsar-perf ``--max-outstanding 1 --disable-batching``; Pulsar only). ``None``
    keeps the driver file's value.
    """

    batch_bytes: int | None = None
    linger_ms: int | None = None
    compression: str | None = None
    send_mode: str | None = None

    def __post_init__(self) -> None:
        if self.batch_bytes is not None and self.batch_bytes < 1:
            raise ValueError(f"ProducerTweak(batch_bytes={self.batch_bytes}): a batch size "
                             "is at least 1 byte")
        if self.linger_ms is not None and self.linger_ms < 0:
            raise ValueError(f"ProducerTweak(linger_ms={self.linger_ms}): a linger time is "
                             ">= 0 ms")
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise ValueError(f"ProducerTweak(compression={self.compression!r}): expected one "
                             f"of {', '.join(COMPRESSIONS)}")
        if self.send_mode is not None and self.send_mode not in SEND_MODES:
            raise ValueError(f"ProducerTweak(send_mode={self.send_mode!r}): expected one of "
                             f"{', '.join(SEND_MODES)}")

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.batch_bytes, self.linger_ms, self.compression,
                                           self.send_mode))

    @property
    def id(self) -> str:
        """``batch16KiB-linger5ms-lz4-sync`` (empty when nothing is tweaked)."""
        parts = []
        if self.batch_bytes is not None:
            parts.append(f"batch{size_id(self.batch_bytes)}")
        if self.linger_ms is not None:
            parts.append(f"linger{self.linger_ms}ms")
        if self.compression is not None:
            parts.append(self.compression)
        if self.send_mode is not None:
            parts.append(self.send_mode)
        return "-".join(parts)
