"""Declared models (pydantic v2) of the files users bring: each key once, with its type,
default, OMB name (alias) and the fix shown when a value is wrong.

These modules import pydantic, so nothing on the plugin's import path imports them: the
classes users and the engine see (``Workload``, ...) import their model when a file is
checked (``pytest --help`` stays fast). Errors go through
:func:`pytest_brokerperf.files.validate`, which names file:line, key, value and fix.
A broker's driver-file model lives in its own package (``brokers/<kind>/driver_file.py``).
"""
