"""Faults as a scenario dimension: a broker node killed, paused, restarted or its power
cut in the middle of the measured window (``--brokerperf-fault``, ``@pytest.mark.fault``).

``spec`` parses what the user asked for; ``control`` is what a provisioner that started
the nodes lets a run do to them; ``injector`` carries the fault out while the load
runs; ``judge`` turns the periods around it into the record's ``fault`` block and says
whether the messages lost are allowed at the run's durability level
(docs/reference/faults.md). A power cut also needs ``undo_log`` (what it takes
away), ``powercut_fs`` (the FUSE filesystem that takes it), ``powercut`` (its mount),
``offered`` (which brokers and modes have it, checked before any broker starts) and
``readback`` (what the broker still holds afterwards; each broker reads its own back).
"""

from pytest_brokerperf.config.fault_spec import FAULT_ACTIONS, FaultSpec, parse_fault, parse_faults

__all__ = ["FAULT_ACTIONS", "FaultSpec", "parse_fault", "parse_faults"]
