"""Exceptions raised by pytest-brokerperf.

The hierarchy, httpx style, so callers catch at the level they need::

    BrokerPerfError
    ├── ConfigError            bad option, ini key, env var, YAML file or SLO file
    │   ├── WorkloadError      an OMB workload YAML that cannot be run
    │   └── SLOSyntaxError     an SLO expression or file that cannot be parsed
    ├── ProvisionError         a broker could not be started, reached or stopped
    │   ├── BrokerUnavailable  a broker or capability is missing here (tests skip)
    │   ├── ClusterUnreachable a remote cluster the user named did not answer (an error)
    │   └── BrokerDied         a broker went away mid-run (the run's record is ``failed``)
    │       └── ClusterLost    a remote cluster stopped answering mid-run
    ├── ResultsWriteError      a result file could not be written (full disk, ...)
    ├── DriverError            a client library call failed (topic creation, ...)
    └── MeasurementError       the harness measured something impossible (a bug)

    KeyboardInterrupt
    └── RunInterrupted         Ctrl-C or SIGTERM during a run (pytest stops, as for Ctrl-C)

Every message names the bad value, where it came from and how to fix it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BrokerDied",
    "BrokerPerfError",
    "BrokerUnavailable",
    "ClusterLost",
    "ClusterUnreachable",
    "ConfigError",
    "DriverError",
    "MeasurementError",
    "ProvisionError",
    "ResultsWriteError",
    "RunInterrupted",
    "SLOSyntaxError",
    "WorkloadError",
]


class BrokerPerfError(Exception):
    """Base class of every error raised by pytest-brokerperf."""


class ConfigError(BrokerPerfError):
    """A setting (flag, ini key, environment variable or file) is invalid."""


class WorkloadError(ConfigError):
    """An OMB workload definition cannot be run; the message names file, key and value."""


class SLOSyntaxError(ConfigError):
    """An SLO expression or SLO file cannot be parsed."""


class ProvisionError(BrokerPerfError):
    """A broker could not be started, reached or stopped."""


class BrokerUnavailable(ProvisionError):
    """A broker, tool or capability is not available on this machine.

    Scenario tests turn this into a skip with the message as the reason.
    """


class ClusterUnreachable(ProvisionError):
    """A remote cluster named by flags did not answer; the message names the address.

    Never a skip: a CI gate pointed at a cluster that is down must not go green. The
    session stops with pytest's usage-error exit code (4), distinct from a failed test.
    """


class BrokerDied(ProvisionError):
    """A locally started broker process or container exited while a run was using it.

    The message names the process and its pid (or the container), its exit status and
    the tail of its log.
    ``partial`` is what the run measured up to the death (a ``RunOutcome`` whose
    delivery was never reconciled), so the failed run still leaves its record.
    """

    partial: Any = None


class ClusterLost(BrokerDied):
    """Every address of a remote cluster stopped answering mid-run, and no message was
    acknowledged or received meanwhile, for longer than the bound
    (:data:`pytest_brokerperf.engine.liveness.REMOTE_LOSS_S`).

    A :class:`BrokerDied`, so the run stops and leaves its ``failed`` record as for a
    local broker's death; the message names the cluster, each address tried, the error
    each gave and for how long.
    """


class ResultsWriteError(BrokerPerfError):
    """A result file could not be written (a full disk, a read-only directory).

    The message names the file, the reason, the free space left where it lives and the
    fix; the run's ``record.json`` is still valid (written whole or not at all, with the
    artefacts that could not be written listed in it).
    """


class DriverError(BrokerPerfError):
    """A broker client operation (admin, produce, consume) failed."""


class MeasurementError(BrokerPerfError):
    """The harness recorded an impossible figure, e.g. e2e <= 0 on one clock.

    This is a bug in the harness or the environment, never a broker result.
    """


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM arrived while a run was measuring.

    A ``KeyboardInterrupt``, so pytest stops the session as for Ctrl-C (fixtures torn
    down, brokers stopped). ``partial`` is what the run measured up to then (a
    ``RunOutcome`` whose delivery was never reconciled), so the run still leaves a
    record marked ``interrupted``; ``signal_name`` says which signal it was.
    """

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(f"run interrupted by {signal_name}")
        self.signal_name = signal_name
        self.partial: Any = None

    @classmethod
    def of(cls, exc: KeyboardInterrupt) -> RunInterrupted:
        """``exc`` itself when it is one, else a ``RunInterrupted`` for Ctrl-C."""
        return exc if isinstance(exc, RunInterrupted) else cls("SIGINT")
