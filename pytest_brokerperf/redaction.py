"""Secrets never reach a log, a traceback or an artefact: one rule for what is secret.

Client properties whose *name* says secret (``sasl.password``, ``sasl.jaas.config``,
``ssl.key.password``, an auth token, ...) are masked wherever the plugin shows a
configuration. :class:`SecretDict` is a plain ``dict`` (client libraries accept it as
their configuration) whose ``repr`` masks those values, so a client library's exception
shown by pytest, with the configuration as the failing call's argument, prints ``***``
instead of the password — in the terminal and in ``--junitxml`` files alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MASK", "SECRET_WORDS", "SecretDict", "is_secret", "redact"]

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
