"""The pytest layer: hooks, fixtures, the ``brokerperf`` fixture's runner, the pre-start
checks, the terminal summary and JUnit, and the ``brokerperf`` command.
"""
