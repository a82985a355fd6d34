"""Raw option values (command line, environment, ini) → typed values, one parser per
option kind (:data:`_PARSERS`); an invalid value raises
:class:`~pytest_brokerperf.core.errors.ConfigError` naming the value, where it came from and what
would be valid. Standard library only (imported for ``pytest --help``).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import SplitResult, urlsplit

from pytest_brokerperf import brokers
from pytest_brokerperf.config.fault_spec import fault_problem
from pytest_brokerperf.config.options import (
    _FALSE,
    _LABEL_RE,
    _RATE_RE,
    _SECONDS_RE,
    _TRUE,
    _VERSION_RE,
    SERVICE_IMAGES,
    OptionSpec,
)
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.redaction import Secret, mask_url

if TYPE_CHECKING:
    from pytest_brokerperf.config.fault_spec import FaultSpec

# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Source:
    """Where a raw value came from, for messages and relative paths."""

    kind: Literal["cli", "env", "ini", "override", "default"]
    label: str
    base_dir: Path

    def fix(self, spec: OptionSpec) -> str:
        if self.kind == "cli":
            return f"pass e.g. {spec.flag}={spec.example}"
        if self.kind == "env":
            return f"set e.g. {spec.env}={spec.example}, or unset it"
        if self.kind == "ini":
            return f"set e.g. {spec.ini} = {spec.example}, or remove the key"
        if self.kind == "override":
            return f"pass e.g. -o {spec.ini}={spec.example}"
        return "this is a bug in pytest-brokerperf's defaults"


def _invalid(spec: OptionSpec, raw: object, src: _Source, requirement: str) -> ConfigError:
    return ConfigError(
        f"invalid {spec.what} {raw!r} from {src.label}: {requirement}; {src.fix(spec)}."
    )


def _did_you_mean(value: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(value, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _one_of(spec: OptionSpec, raw: object, value: str, src: _Source) -> str:
    norm = value.strip().lower()
    if norm in spec.choices:
        return norm
    raise _invalid(
        spec, raw, src,
        f"expected one of {', '.join(spec.choices)}{_did_you_mean(norm, spec.choices)}",
    )


def _as_text(spec: OptionSpec, raw: object, src: _Source) -> str:
    if isinstance(raw, str):
        return raw
    raise _invalid(spec, raw, src, "expected a string")


def _parse_brokers(spec: OptionSpec, raw: object, src: _Source) -> tuple[str, ...]:
    items: list[str]
    if isinstance(raw, str):
        items = raw.split(",")
    elif isinstance(raw, list | tuple) and all(isinstance(x, str) for x in raw):
        items = list(raw)
    else:
        raise _invalid(spec, raw, src, "expected a comma-separated list of brokers")
    names: list[str] = []
    for item in items:
        name = item.strip().lower()
        if not name:
            continue
        if not brokers.is_known(name):
            known = brokers.names()
            raise _invalid(
                spec, raw, src,
                f"unknown broker {name!r}{_did_you_mean(name, known)}; "
                f"known brokers are {', '.join(known)}",
            )
        if name not in names:
            names.append(name)
    if not names:
        raise _invalid(spec, raw, src, "expected at least one broker")
    return tuple(names)


def _parse_choice(spec: OptionSpec, raw: object, src: _Source) -> str:
    return _one_of(spec, raw, _as_text(spec, raw, src), src)


def _parse_integer(spec: OptionSpec, raw: object, src: _Source, minimum: int) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"\s*[+-]?\d+\s*", raw):
        value = int(raw)
    if value is None or value < minimum:
        raise _invalid(spec, raw, src, f"expected an integer >= {minimum}")
    return value


def _parse_int(spec: OptionSpec, raw: object, src: _Source) -> int:
    return _parse_integer(spec, raw, src, 1)


def _parse_count(spec: OptionSpec, raw: object, src: _Source) -> int:
    return _parse_integer(spec, raw, src, 0)


def _parse_workers(spec: OptionSpec, raw: object, src: _Source) -> int | None:
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    try:
        return _parse_int(spec, raw, src)
    except ConfigError:
        raise _invalid(spec, raw, src, "expected an integer >= 1 or auto") from None


_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _parse_seconds(spec: OptionSpec, raw: object, src: _Source) -> float:
    allow_zero = spec.name in ("warmup", "broker_warmup")
    requirement = (
        f"expected a number of seconds {'>= 0' if allow_zero else '> 0'} "
        "(optionally with a unit: 500ms, 90s, 2m, 1h)"
    )
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _SECONDS_RE.match(raw)):
        unit = (m["unit"] or "s").lower()
        value = float(m["num"]) * _UNIT_SECONDS[unit]
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise _invalid(spec, raw, src, requirement)
    return value


def _parse_percent(spec: OptionSpec, raw: object, src: _Source) -> float:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%?\s*", raw)):
        value = float(m[1])
    if value is None or not math.isfinite(value) or not 0 < value <= 100:
        raise _invalid(spec, raw, src, "expected a percentage 0 < PERCENT <= 100, e.g. 5 or 5%")
    return value


def _parse_rate(spec: OptionSpec, raw: object, src: _Source) -> float:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _RATE_RE.match(raw)):
        mult = {"k": 1e3, "K": 1e3, "M": 1e6}.get(m["mult"] or "", 1.0)
        value = float(m["num"]) * mult
    if value is None or not math.isfinite(value) or value <= 0:
        raise _invalid(spec, raw, src, "expected a rate in msg/s > 0, e.g. 5000 or 50k")
    return value


def _parse_bool(spec: OptionSpec, raw: object, src: _Source) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        norm = raw.strip().lower()
        if norm in _TRUE:
            return True
        if norm in _FALSE:
            return False
    raise _invalid(spec, raw, src, "expected a boolean: 1/0, true/false, yes/no")


def _resolve_path(raw: str, src: _Source) -> Path:
    path = Path(os.path.expandvars(raw.strip())).expanduser()
    if not path.is_absolute():
        path = src.base_dir / path
    return Path(os.path.normpath(path))


def _parse_dir(spec: OptionSpec, raw: object, src: _Source) -> Path:
    text = _as_text(spec, raw, src)
    if not text.strip():
        raise _invalid(spec, raw, src, "expected a directory path")
    path = _resolve_path(text, src)
    if path.exists() and not path.is_dir():
        raise _invalid(spec, raw, src, f"{path} exists and is not a directory")
    return path


def _parse_file(spec: OptionSpec, raw: object, src: _Source) -> Path:
    text = _as_text(spec, raw, src)
    if not text.strip():
        raise _invalid(spec, raw, src, "expected a file path")
    path = _resolve_path(text, src)
    if not path.is_file():
        problem = "is a directory" if path.is_dir() else "does not exist"
        raise _invalid(spec, raw, src, f"{path} {problem}; expected an existing file")
    return path


def _parse_existing_dir(spec: OptionSpec, raw: object, src: _Source) -> Path:
    text = _as_text(spec, raw, src)
    path = _resolve_path(text, src) if text.strip() else None
    if path is None or not path.is_dir():
        raise _invalid(spec, raw, src, f"{path} is not an existing directory")
    return path


def _parse_label(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    if not _LABEL_RE.match(text):
        raise _invalid(
            spec, raw, src,
            "expected 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return text


def _parse_formats(spec: OptionSpec, raw: object, src: _Source) -> tuple[str, ...]:
    items = [x.strip().lower() for x in _as_text(spec, raw, src).split(",") if x.strip()]
    if not items:
        raise _invalid(spec, raw, src, f"expected one or more of {', '.join(spec.choices)}")
    for item in items:
        if item not in spec.choices:
            raise _invalid(spec, raw, src, f"{item!r} is not one of {', '.join(spec.choices)}"
                           f"{_did_you_mean(item, spec.choices)}")
    return tuple(dict.fromkeys(items))


def _parse_budgets(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    from pytest_brokerperf.config.fail_on import parse_fail_on

    try:
        parse_fail_on(text)
    except ConfigError as exc:
        raise _invalid(spec, raw, src, str(exc)) from None
    return text


def _parse_version(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    if not _VERSION_RE.match(text):
        raise _invalid(spec, raw, src, "expected a release version like 4.3.1 or 3.9.0")
    return text


_HOSTPORT_RE: Final = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):(\d{1,5})$")
_BYTES_RE: Final = re.compile(
    r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[KMGT]i?B|kB|B)?\s*$"
)
_BYTE_UNITS: Final = {
    "B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4,
}
_OWNER_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def _parse_hostports(spec: OptionSpec, raw: object, src: _Source) -> str:
    items = [x.strip() for x in _as_text(spec, raw, src).split(",") if x.strip()]
    if not items:
        raise _invalid(spec, raw, src, "expected HOST:PORT[,HOST:PORT...]")
    for item in items:
        m = _HOSTPORT_RE.match(item)
        if m is None or not 0 < int(m.group(1)) < 65536:
            raise _invalid(
                spec, raw, src, f"{item!r} is not HOST:PORT with a port from 1 to 65535"
            )
    return ",".join(items)


def _parse_bytes(spec: OptionSpec, raw: object, src: _Source) -> int:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _BYTES_RE.match(raw)):
        value = float(m["num"]) * _BYTE_UNITS[m["unit"] or "B"]
    if value is None or not math.isfinite(value) or value < 1:
        raise _invalid(
            spec, raw, src, "expected a size >= 1 byte, e.g. 500MB, 2GiB or 1000000 (bytes)"
        )
    return int(value)


#: The smallest memory cap a broker node can start under: a JVM broker's heap (Kafka's
#: default is 1 GiB, ``-Xmx`` is set from the cap), its metaspace and some page cache.
MIN_BROKER_MEMORY = 256 * 1024**2


def _parse_memory(spec: OptionSpec, raw: object, src: _Source) -> int:
    """A memory cap: a size of at least :data:`MIN_BROKER_MEMORY` (``1`` is one byte, not
    one MiB: refused with the value in MiB rather than shown as "0MiB")."""
    value = _parse_bytes(spec, raw, src)
    if value < MIN_BROKER_MEMORY:
        raise _invalid(spec, raw, src, f"{value:,} bytes ({value / 1024**2:.3g} MiB) is below "
                       f"the {MIN_BROKER_MEMORY // 1024**2} MiB a broker node needs to start; "
                       "give a unit, e.g. 1536MiB or 2GiB")
    return value


def _parse_maxrate(spec: OptionSpec, raw: object, src: _Source) -> tuple[float, str]:
    """``(value, "msg/s")`` or ``(bytes per second, "B/s")``."""
    if isinstance(raw, str) and raw.strip().endswith("/s") and "B" in raw:
        size = raw.strip()[:-2]
        m = _BYTES_RE.match(size)
        if m is not None and m["unit"]:
            value = float(m["num"]) * _BYTE_UNITS[m["unit"]]
            if math.isfinite(value) and value > 0:
                return (value, "B/s")
        raise _invalid(spec, raw, src, "expected a byte rate > 0 such as 20MiB/s or 50MB/s")
    try:
        return (_parse_rate(spec, raw, src), "msg/s")
    except ConfigError:
        raise _invalid(
            spec, raw, src, "expected msg/s (5000, 50k) or a byte rate (20MiB/s)"
        ) from None


def _parse_owner(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    if not _OWNER_RE.match(text):
        raise _invalid(
            spec, raw, src,
            "expected 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or "
            "digit",
        )
    return text


def _url_port_ok(parts: SplitResult) -> bool:
    """Whether the URL's port, if any, is a number 1-65535 (``urlsplit`` checks it lazily)."""
    try:
        port = parts.port
    except ValueError:
        return False
    return port is None or port > 0


def _split_url(url: str, schemes: Iterable[str]) -> tuple[SplitResult | None, str | None]:
    """The URL's parts and None, or why it is no URL of ``schemes`` with a host and a port
    1-65535 (if any): ``"port"`` when only the port is wrong, else ``"form"``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None, "form"
    if parts.scheme not in set(schemes) or not parts.hostname:
        return None, "form"
    if not _url_port_ok(parts):
        return None, "port"
    return parts, None


def _url_items(spec: OptionSpec, raw: object, src: _Source) -> list[str]:
    if isinstance(raw, list | tuple):
        return [x for x in (str(y).strip() for y in raw) if x]
    return [x for x in (y.strip() for y in _as_text(spec, raw, src).split(",")) if x]


def _parse_urls(spec: OptionSpec, raw: object, src: _Source) -> tuple[Secret, ...]:
    """Comma-separated http(s) URLs, held as :class:`Secret` (user info may be a password);
    a message shows only the masked entry at fault, never the others."""
    urls = _url_items(spec, raw, src)
    for i, url in enumerate(urls, start=1):
        _, problem = _split_url(url, ("http", "https"))
        if problem is not None:
            why = ("its port is not a number 1-65535" if problem == "port"
                   else "it is not an http:// or https:// URL with a host")
            raise ConfigError(
                f"invalid {spec.what} from {src.label}: entry {i} of {len(urls)} "
                f"{mask_url(url)!r}: {why}; {src.fix(spec)}.")
    return tuple(Secret(u) for u in urls)


_IMAGE_REF_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$")


def _parse_images(spec: OptionSpec, raw: object, src: _Source) -> tuple[tuple[str, str], ...]:
    """``kafka=REF,pulsar=REF`` → ``(("kafka", REF), ...)``; one image per broker kind."""
    if isinstance(raw, list | tuple):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in _as_text(spec, raw, src).split(",")]
    images: dict[str, str] = {}
    for item in (x for x in items if x):
        kind, sep, ref = (part.strip() for part in item.partition("="))
        kind = kind.lower()
        if not sep or not ref:
            raise _invalid(spec, raw, src, f"{item!r} is not KIND=IMAGE (e.g. "
                           "kafka=apache/kafka:4.3.1)")
        if not brokers.is_known(kind) and kind not in SERVICE_IMAGES:
            names = (*brokers.names(), *SERVICE_IMAGES)
            raise _invalid(spec, raw, src,
                           f"unknown broker {kind!r}{_did_you_mean(kind, names)}; "
                           f"known brokers are {', '.join(brokers.names())} (and "
                           f"{', '.join(SERVICE_IMAGES)} for AutoMQ's object store)")
        if not _IMAGE_REF_RE.match(ref):
            raise _invalid(spec, raw, src, f"{ref!r} is not an image reference "
                           "(repository[:tag] or repository@sha256:digest, lower case)")
        if kind in images:
            raise _invalid(spec, raw, src, f"two images for {kind!r}")
        images[kind] = ref
    return tuple(sorted(images.items()))


def _parse_faults(spec: OptionSpec, raw: object, src: _Source) -> tuple[FaultSpec, ...]:
    """``kill-broker@5s,pause-broker@5s:3s`` → one :class:`FaultSpec` per test."""

    items = ([str(x) for x in raw] if isinstance(raw, list | tuple)
             else _as_text(spec, raw, src).split(","))
    faults: list[FaultSpec] = []
    for item in (x.strip() for x in items if x.strip()):
        got = fault_problem(item)
        if isinstance(got, str):
            raise _invalid(spec, raw, src, got)
        faults.append(got)
    return tuple(faults)


def _parse_baseline_ref(spec: OptionSpec, raw: object, src: _Source) -> str:
    """A results directory (made absolute) or a stored run's reference (number, name,
    ``last``, ``all``), resolved against the storage when the baseline is loaded."""
    text = _as_text(spec, raw, src).strip()
    if not text:
        raise _invalid(spec, raw, src, "expected a results directory or a stored run")
    if _LABEL_RE.match(text) and not _resolve_path(text, src).is_dir():
        return text  # a stored run: a number, a name, last or all
    path = _resolve_path(text, src)
    if not path.is_dir():
        raise _invalid(spec, raw, src, f"{path} is not an existing directory (nor a stored "
                       "run's number or name)")
    return str(path)


def _parse_url(spec: OptionSpec, raw: object, src: _Source) -> str:
    """One URL whose scheme is one of ``spec.choices``."""
    url = _as_text(spec, raw, src).strip()
    if _split_url(url, spec.choices)[1] is not None:
        schemes = " or ".join(f"{c}://" for c in spec.choices)
        raise ConfigError(
            f"invalid {spec.what} {mask_url(url)!r} from {src.label}: expected a {schemes} "
            f"URL with a host (and a port 1-65535, if any); {src.fix(spec)}.")
    return url.rstrip("/")


def _parse_amqp_urls(spec: OptionSpec, raw: object, src: _Source) -> tuple[Secret, ...]:
    """Comma-separated ``amqp://`` / ``amqps://`` URIs held as :class:`Secret`; one set of
    credentials per run; messages never quote a password."""
    uris = _url_items(spec, raw, src)
    if not uris:
        raise ConfigError(f"invalid {spec.what} from {src.label}: expected amqp://HOST:PORT "
                          f"URIs; {src.fix(spec)}.")
    users: list[str | None] = []
    passwords: set[str | None] = set()
    for i, uri in enumerate(uris, start=1):
        parts, _ = _split_url(uri, ("amqp", "amqps"))
        if parts is None:
            raise ConfigError(f"invalid {spec.what} from {src.label}: entry {i} of {len(uris)} "
                              f"{mask_url(uri)!r} is not an amqp:// or amqps:// URI with a "
                              f"host (and a port 1-65535, if any); {src.fix(spec)}.")
        users.append(parts.username)
        passwords.add(parts.password)
    if len(set(users)) > 1 or len(passwords) > 1:
        shown = ", ".join(mask_url(u) for u in uris)
        raise ConfigError(
            f"invalid {spec.what} from {src.label}: every URI must carry the same user and "
            f"password (one set of credentials per run), got {shown}; give each node's URI "
            f"the same credentials; {src.fix(spec)}.")
    return tuple(Secret(u) for u in uris)


def _remote_flags_given(values: dict[str, Any], sources: Mapping[str, str],
                        provision: str) -> bool:
    """Check every broker kind's remote-cluster flags (its package declares them, see
    :class:`~pytest_brokerperf.brokers.base.RemoteFlags`); True when some name a cluster.

    A cluster address contradicts a local provisioning mode; remote mode needs the address
    of every selected broker; a client config needs its address.
    """
    from pytest_brokerperf.brokers.base import flag_of

    remote = False
    seen: dict[int, str] = {}
    for name in brokers.names():
        kind = brokers.get(name)
        flags = kind.remote_flags
        if flags is None or id(flags) in seen:
            continue
        seen[id(flags)] = name
        given = [f for f in flags.address if values.get(f) not in (None, "", ())]
        if given:
            if provision not in ("auto", "remote"):
                raise ConfigError(
                    f"{flag_of(given[0])} (from {sources[given[0]]}) names a remote "
                    f"cluster, but --brokerperf-provision is {provision!r} (from "
                    f"{sources['provision']}); drop one of them, or pass "
                    "--brokerperf-provision=remote.")
            kind.complete_remote(values)
            remote = True
            continue
        if provision == "remote":
            users = [b for b in values["brokers"] if brokers.get(b).remote_flags is flags]
            if users:
                raise ConfigError(
                    "--brokerperf-provision=remote needs the cluster's address for "
                    f"{users[0]}: {flags.needs}.")
        cfg = flags.client_config
        if cfg is not None and values.get(cfg) is not None:
            raise ConfigError(
                f"{flag_of(cfg)} (from {sources[cfg]}) is the client config of a remote "
                f"cluster; it needs {flags.client_config_needs} (local brokers take no "
                "client config).")
    return remote


#: The durability levels, for messages (pytest_brokerperf.brokers.durability has the full table).
_LEVEL_NAMES: Final = (
    "1: sync replication + fsync, 2: sync replication + page cache, "
    "3: async replication + fsync, 4: async replication + page cache"
)


def _parse_levels(spec: OptionSpec, raw: object, src: _Source) -> tuple[int, ...]:
    """``1,2`` / ``all`` / a TOML int or list → ascending, de-duplicated levels 1-4."""
    items: list[object]
    if isinstance(raw, str):
        if raw.strip().lower() == "all":
            return (1, 2, 3, 4)
        items = [x.strip() for x in raw.split(",") if x.strip()]
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        items = [raw]
    if not items:
        raise _invalid(spec, raw, src, f"expected levels 1-4 such as 1,2 or all ({_LEVEL_NAMES})")
    levels: set[int] = set()
    for item in items:
        level: int | None = None
        if isinstance(item, int) and not isinstance(item, bool):
            level = item
        elif isinstance(item, str) and re.fullmatch(r"[dD]?\d+", item.strip()):
            level = int(item.strip().lstrip("dD"))
        if level not in (1, 2, 3, 4):
            raise _invalid(
                spec, raw, src,
                f"{item!r} is not a durability level; expected 1, 2, 3 or 4 ({_LEVEL_NAMES}), "
                "comma-separated, or all",
            )
        levels.add(level)
    return tuple(sorted(levels))


def _parse_rates(spec: OptionSpec, raw: object, src: _Source) -> tuple[float, ...]:
    """Comma-separated rates (``5k,10k,20k``) → ascending, de-duplicated msg/s."""
    items: list[object]
    if isinstance(raw, str):
        items = [x for x in raw.split(",") if x.strip()]
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        items = [raw]
    if not items:
        raise _invalid(spec, raw, src, "expected at least one rate, e.g. 5k,10k,20k")
    values: set[float] = set()
    for item in items:
        try:
            values.add(_parse_rate(spec, item, src))
        except ConfigError:
            raise _invalid(
                spec, raw, src, f"{item!r} is not a rate in msg/s > 0; expected e.g. 5k,10k,20k"
            ) from None
    return tuple(sorted(values))


_SPARK_MASTER_RE: Final = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?"
    r"|local-cluster\[\d+,\d+,\d+\]"
    r"|spark://[^\s/:,]+:\d{1,5}(,[^\s/:,]+:\d{1,5})*"
    r"|yarn"
    r"|k8s://\S+"
    r"|mesos://\S+)$")


def _parse_spark_master(spec: OptionSpec, raw: object, src: _Source) -> str:
    """A Spark master URL in Spark's own spelling (passed through unchanged)."""
    text = _as_text(spec, raw, src).strip()
    if not _SPARK_MASTER_RE.match(text):
        raise _invalid(spec, raw, src, "expected a Spark master: local[N], "
                       "local-cluster[N,cores,MiB], spark://host:port, yarn or k8s://URL")
    return text


_PARSERS: Final[Mapping[str, Callable[[OptionSpec, object, _Source], Any]]] = {
    "brokers": _parse_brokers,
    "choice": _parse_choice,
    "int": _parse_int,
    "workers": _parse_workers,
    "seconds": _parse_seconds,
    "percent": _parse_percent,
    "count": _parse_count,
    "rate": _parse_rate,
    "bool": _parse_bool,
    "dir": _parse_dir,
    "file": _parse_file,
    "existing_dir": _parse_existing_dir,
    "label": _parse_label,
    "version": _parse_version,
    "hostports": _parse_hostports,
    "bytes": _parse_bytes,
    "memory": _parse_memory,
    "maxrate": _parse_maxrate,
    "owner": _parse_owner,
    "urls": _parse_urls,
    "rates": _parse_rates,
    "url": _parse_url,
    "amqpurls": _parse_amqp_urls,
    "levels": _parse_levels,
    "formats": _parse_formats,
    "budgets": _parse_budgets,
    "images": _parse_images,
    "faults": _parse_faults,
    "baseline_ref": _parse_baseline_ref,
    "spark_master": _parse_spark_master,
}


def _unset(raw: object) -> bool:
    """None, or a blank string (an empty env var or ini value means "not set")."""
    return raw is None or (isinstance(raw, str) and not raw.strip())
