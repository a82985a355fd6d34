#!/usr/bin/env python3
"""The official apachepulsar/pulsar image's ``bin/apply-config-from-env-with-prefix.py``
contract, for the local image: ``apply-config-from-env-with-prefix.py PREFIX FILE...``
sets (or adds) ``<key>`` from each variable ``PREFIX<key>``; as the official script, a
variable named exactly like a key of the file also replaces it.
"""
import importlib.util
import os
import sys

_spec = importlib.util.spec_from_file_location(
    "apply_config", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "apply-config-from-env.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)

if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: apply-config-from-env-with-prefix.py PREFIX FILE...")
    _mod.main(sys.argv[2:], prefix=sys.argv[1])
