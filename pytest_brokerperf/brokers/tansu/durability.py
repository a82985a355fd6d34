"""What durability means on Tansu: nothing survives, so no level applies."""

from __future__ import annotations

__all__ = ["IN_MEMORY_NOTE"]

IN_MEMORY_NOTE = (
    "in-memory storage (memory://): no disk, no fsync, nothing survives a restart; "
    "durability levels do not apply"
)
