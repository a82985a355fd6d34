"""The RabbitMQ driver file's closed choices, declared once: the config class
(:mod:`.config`) and the file's declared model (:mod:`.driver_file`) both read them."""

from __future__ import annotations

__all__ = ["EXCHANGE_TYPES", "QUEUE_TYPES", "STREAM_OFFSETS"]

QUEUE_TYPES = ("CLASSIC", "QUORUM", "STREAM")
EXCHANGE_TYPES = ("FANOUT", "DIRECT")
STREAM_OFFSETS = ("first", "last", "next")
