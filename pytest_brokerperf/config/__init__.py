"""Options → one frozen ``Settings``: the option table, the value parsers, and the user's
YAML files read with line numbers.
"""
