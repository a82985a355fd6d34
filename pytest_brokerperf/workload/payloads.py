"""A workload's payloads: the pool producers pick from (OMB's three ways to get one).

* ``useRandomizedPayloads``: ``randomizedPayloadPoolSize`` payloads, each
  ``int(messageSize * randomBytesRatio)`` random bytes then zeros (OMB's compression-test
  payloads);
* else ``payloadFile``, found as OMB finds it and checked for OMB's length;
* else one payload of pseudo-random bytes (OMB has no such default; random rather than
  zeros so compression cannot flatter the result).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Protocol

from pytest_brokerperf.core.errors import WorkloadError
from pytest_brokerperf.core.files import LINES
from pytest_brokerperf.core.shipped import WORKLOADS_DIR
from pytest_brokerperf.workload.keys import Problem

__all__ = ["PAYLOAD_HEADER_BYTES", "PayloadSpec", "payload_path", "payload_pool",
           "read_payload_file"]

#: Bytes at the start of every payload that the harness overwrites with its own header
#: (intended and actual send time, producer id, sequence). Payloads must be at least this big.
PAYLOAD_HEADER_BYTES = 32


class PayloadSpec(Protocol):
    """The keys a payload pool is made from (a :class:`~pytest_brokerperf.workload.model.Workload`
    has them): declared here, so this module needs no workload class."""

    @property
    def source(self) -> str: ...
    @property
    def message_size(self) -> int: ...
    @property
    def payload_file(self) -> str | None: ...
    @property
    def use_randomized_payloads(self) -> bool: ...
    @property
    def random_bytes_ratio(self) -> float: ...
    @property
    def randomized_payload_pool_size(self) -> int: ...


def _search_dirs(w: PayloadSpec, base_dir: Path | None) -> list[tuple[str, Path]]:
    dirs: list[tuple[str, Path]] = []
    if base_dir is not None:
        dirs.append(("base directory", Path(base_dir)))
    elif not (w.source.startswith("<") and w.source.endswith(">")):
        dirs.append(("workload file's directory", Path(w.source).resolve().parent))
    dirs.append(("current directory", Path.cwd()))
    dirs.append(("pytest-brokerperf's shipped workloads", WORKLOADS_DIR))
    return dirs


def payload_path(w: PayloadSpec, base_dir: Path | None = None) -> Path:
    """Where ``payloadFile`` is found: an absolute path as is; a relative one in
    ``base_dir`` (default: the workload file's directory), then the current directory
    (OMB's rule), then the payloads shipped with pytest-brokerperf."""
    if w.payload_file is None:
        raise WorkloadError(f"{w.source}: payloadFile is not set")
    rel = Path(w.payload_file)
    if rel.is_absolute():
        candidates = [("absolute path", rel)]
    else:
        candidates = [(label, d / rel) for label, d in _search_dirs(w, base_dir)]
    for _, candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = "; ".join(f"{label}: {p}" for label, p in candidates)
    raise WorkloadError(
        Problem(
            "payload_file",
            w.payload_file,
            f"payload file not found (tried {tried})",
            "give a path relative to the workload file or the current directory, or "
            "remove payloadFile to use a generated payload",
        ).render(w.source, LINES.get())
    )


def read_payload_file(w: PayloadSpec, base_dir: Path | None) -> bytes:
    """The payload file's bytes; :class:`Problem` when its length is not messageSize."""
    path = payload_path(w, base_dir)
    data = path.read_bytes()
    if len(data) != w.message_size:
        raise Problem(
            "payload_file",
            w.payload_file,
            f"Payload length mismatch. Actual is: {len(data)}, but expected: "
            f"{w.message_size} (messageSize; file {path})",
            f"use a payload file of exactly {w.message_size} bytes or set "
            f"`messageSize: {len(data)}`",
        )
    return data


def payload_pool(w: PayloadSpec, base_dir: Path | None = None, *, seed: int = 0) -> list[bytes]:
    """The payload pool, exactly messageSize bytes each (see the module docstring).

    Random bytes come from ``random.Random(seed)``: the same seed gives the same pool.
    """
    rng = random.Random(seed)
    if w.use_randomized_payloads:
        n_random = int(w.message_size * w.random_bytes_ratio)
        zeros = bytes(w.message_size - n_random)
        return [rng.randbytes(n_random) + zeros for _ in range(w.randomized_payload_pool_size)]
    if w.payload_file is not None:
        try:
            return [read_payload_file(w, base_dir)]
        except Problem as p:
            raise WorkloadError(p.render(w.source, None)) from None
    return [rng.randbytes(w.message_size)]
