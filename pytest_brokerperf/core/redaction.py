"""Secrets never reach a log, a traceback or an artefact: one rule for what is secret.

Client properties whose *name* says secret (``sasl.password``, ``sasl.jaas.config``,
``ssl.key.password``, an auth token, ...) are masked wherever the plugin shows a
configuration. :class:`SecretDict` is a plain ``dict`` (client libraries accept it as
their configuration) whose ``repr`` masks those values, so a client library's exception
shown by pytest, with the configuration as the failing call's argument, prints ``***``
instead of the password — in the terminal and in ``--junitxml`` files alike.

A single secret-bearing *value* (a URL with ``user:password@``, a token) is a
:class:`Secret`: not a ``str``, so it cannot be formatted, concatenated or written to JSON
by accident; its ``repr``/``str`` show the value with the credential masked, and only
:meth:`Secret.reveal` gives the real value, at the one call that hands it to a client.
Settings hold every credential-bearing option as ``Secret`` (``--rabbitmq-url``,
``--brokerperf-prometheus``), so a dataclass ``repr``, a traceback's locals (``-l``) and
a usage error all print the masked form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["MASK", "SECRET_WORDS", "Secret", "SecretDict", "is_secret", "mask_url", "redact"]

#: Fragments of a property name that mark its value as secret (case-insensitive).
SECRET_WORDS: Final = ("password", "secret", "jaas", "token", "private", "credential",
                       "key.pem", "keystore", "auth_params", "authparams")
MASK: Final = "***"


def is_secret(name: str) -> bool:
    """Whether a property's value must never be shown."""
    low = name.lower()
    return any(w in low for w in SECRET_WORDS)


def redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` with every secret value masked."""
    return {k: (MASK if is_secret(str(k)) and v not in (None, "") else v)
            for k, v in settings.items()}


class SecretDict(dict[str, Any]):
    """A client configuration whose ``repr``/``str`` mask secret values."""

    def __repr__(self) -> str:
        return repr(redact(self))

    __str__ = __repr__

    def copy(self) -> SecretDict:
        return SecretDict(self)


def mask_url(url: str) -> str:
    """``url`` with the password of its user info and its query masked:
    ``amqp://user:***@host:5672/vh``. Not a URL with a netloc: masked whole."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    if not parts.scheme or not parts.netloc:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{user}@{host}"
    query = f"?{MASK}" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


class Secret:
    """One value that may hold a credential; shown masked everywhere, revealed on request.

    Equality and hashing follow the real value (two URLs with the same credentials are the
    same setting); ordering, formatting and JSON all see only :meth:`shown`.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = str(value)

    def reveal(self) -> str:
        """The real value, for the client call that needs it; never for a message."""
        return self._value

    def shown(self) -> str:
        """The value as messages, results and manifests may show it."""
        return mask_url(self._value)

    def __repr__(self) -> str:
        return f"Secret({self.shown()!r})"

    def __str__(self) -> str:
        return self.shown()

    def __format__(self, spec: str) -> str:
        return format(self.shown(), spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[Any, ...]:  # xdist/pickle carry the real value
        return (Secret, (self._value,))
