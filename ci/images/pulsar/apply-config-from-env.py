#!/usr/bin/env python3
"""The official apachepulsar/pulsar image's configuration contract, for the local image.

For each file given: a line ``key=value`` whose key is also the name of an environment
variable gets that variable's value; ``PULSAR_PREFIX_<key>`` variables set (or add)
``<key>``, for keys the file does not hold. ``--print`` writes the result to stdout
instead of the file (used by tests).
"""
import os
import sys

PREFIX = "PULSAR_PREFIX_"


def apply(lines, env, prefix=PREFIX):
    out, seen = [], set()
    extra = {k[len(prefix):]: v for k, v in env.items() if k.startswith(prefix)}
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            key = stripped.split("=", 1)[0].strip()
            seen.add(key)
            if key in extra:
                line = f"{key}={extra[key]}\n"
            elif key in env:
                line = f"{key}={env[key]}\n"
        out.append(line if line.endswith("\n") else line + "\n")
    for key in sorted(set(extra) - seen):
        out.append(f"{key}={extra[key]}\n")
    return out


def main(argv, prefix=PREFIX):
    to_stdout = "--print" in argv
    for path in [a for a in argv if a != "--print"]:
        with open(path) as f:
            lines = apply(f.readlines(), os.environ, prefix)
        if to_stdout:
            sys.stdout.write("".join(lines))
        else:
            with open(path, "w") as f:
                f.writelines(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
