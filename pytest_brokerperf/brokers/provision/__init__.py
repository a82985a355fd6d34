"""Where brokers come from: the machinery local processes and containers share.

Each broker kind knows how it is started in each mode (its
:class:`~pytest_brokerperf.brokers.base.BrokerType`); this package holds what they
share — managed processes that never outlive pytest (:mod:`.process`), the lifecycle
base every local broker subclasses (:mod:`.lifecycle`), Java discovery and JVM flags
(:mod:`.java`), the broker/generator CPU split (:mod:`.cpus`), Maven jar resolution
(:mod:`.maven`), free ports (:mod:`.ports`), containers (:mod:`.containers`,
:mod:`.container_node`). It knows no broker kind: what ``auto`` becomes and the one start
call the fixtures make are the session's (:mod:`pytest_brokerperf.plugin.broker_session`).
"""
