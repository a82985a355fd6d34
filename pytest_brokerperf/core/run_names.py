"""Run ids and the names that carry them: ``YYYYmmdd-HHMMSS-<6 hex>`` (UTC).

Every topic and group a run creates embeds its run id (``bp-<owner>-<run id>-...``), so a
cleanup that never saw the run can still tell when it began.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets

__all__ = ["RUN_ID_IN_NAME", "created_at", "new_run_id"]

#: A generated run id inside a topic or group name: ``YYYYmmdd-HHMMSS-<6 hex>`` (UTC).
RUN_ID_IN_NAME = re.compile(r"(?<![0-9])(\d{8}-\d{6})-[0-9a-f]{6}(?![0-9a-f])")
_RUN_ID_FORMAT = "%Y%m%d-%H%M%S"


def new_run_id(now: _dt.datetime | None = None) -> str:
    """A fresh run id, ``YYYYmmdd-HHMMSS-<6 hex>`` in UTC."""
    now = now or _dt.datetime.now(_dt.UTC)
    return f"{now.astimezone(_dt.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def created_at(name: str) -> _dt.datetime | None:
    """When the run that created ``name`` began (UTC), from its embedded run id."""
    m = RUN_ID_IN_NAME.search(name)
    if m is None:
        return None
    try:
        return _dt.datetime.strptime(m.group(1), _RUN_ID_FORMAT).replace(tzinfo=_dt.UTC)
    except ValueError:
        return None
