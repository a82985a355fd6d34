#!/usr/bin/env python3
"""Run a GitHub Actions workflow's steps locally, in order, with the job's environment.

`act` needs container images this machine cannot pull, so this drives the workflow the
plain way: every ``run:`` step is written to a file and run with GitHub's default shell
(``bash --noprofile --norc -eo pipefail``) in the workspace, with the job's and the
step's ``env:``, ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY`` and ``GITHUB_WORKSPACE``;
``if:`` conditions and ``${{ }}`` expressions are evaluated (``github.*``, ``env.*``,
``steps.<id>.outputs.*``, ``runner.os``, ``success()``, ``always()``, ``failure()``,
``hashFiles()``). The actions a step ``uses:`` are emulated on the local disk:

* ``actions/cache``, ``actions/cache/restore``, ``actions/cache/save``: a directory per
  key under ``--store``; a restore takes the exact key, else the newest key starting
  with a ``restore-keys`` prefix, as GitHub does;
* ``actions/upload-artifact``: a copy under ``<store>/artifacts/<name>``;
* ``marocchino/sticky-pull-request-comment``: the comment's body kept as
  ``<store>/pr-comment-<header>.md`` (one per header: the sticky comment);
* ``actions/checkout``, ``actions/setup-python``, ``actions/setup-java``: nothing (the
  workspace and the interpreter are this machine's).

    python ci/github/drive_workflow.py ci/github/perf-gate.yml --workspace W --store S \\
        [--ref refs/heads/main] [--event push] [--run-id 7] [--env KEY=VALUE ...] \\
        [--skip Install]

``--env`` adds or overrides variables (printed, so a transcript says what differed from
CI); ``--skip`` leaves out steps whose name contains the text (e.g. the install).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DriveResult", "StepResult", "drive", "main"]

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class _Ctx:
    """A context object: attribute access, '' for anything absent (as GitHub's)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        v = self._values.get(name.replace("_", "-"), self._values.get(name, ""))
        return _Ctx(v) if isinstance(v, Mapping) else v


@dataclass
class StepResult:
    name: str
    ran: bool
    code: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass
class DriveResult:
    steps: list[StepResult]
    success: bool

    def step(self, text: str) -> StepResult:
        return next(s for s in self.steps if text in s.name)


def _translate(expr: str) -> str:
    """A GitHub expression as Python (operators only; contexts are objects)."""
    out, i = [], 0
    while i < len(expr):
        c = expr[i]
        if c == "'":  # a string literal ('' escapes a quote)
            j = i + 1
            while j < len(expr):
                if expr[j] == "'" and expr[j + 1:j + 2] == "'":
                    j += 2
                    continue
                if expr[j] == "'":
                    break
                j += 1
            out.append(repr(expr[i + 1:j].replace("''", "'")))
            i = j + 1
        elif expr.startswith("&&", i):
            out.append(" and ")
            i += 2
        elif expr.startswith("||", i):
            out.append(" or ")
            i += 2
        elif c == "!" and not expr.startswith("!=", i):
            out.append(" not ")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class _Runner:
    def __init__(self, workflow: Path, workspace: Path, store: Path, *, ref: str, event: str,
                 run_id: str, extra_env: Mapping[str, str], skip: Sequence[str]) -> None:
        doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
        jobs = doc["jobs"]
        self.job_name, self.job = next(iter(jobs.items()))
        self.workspace, self.store = workspace, store
        self.github = {"ref": ref, "event_name": event, "run_id": run_id,
                       "workspace": str(workspace), "repository": "local/drive"}
        self.extra_env = dict(extra_env)
        self.skip = list(skip)
        self.steps: dict[str, dict[str, Any]] = {}
        self.ok = True
        self.summary = workspace / ".github-step-summary.md"
        self.post: list[tuple[str, Mapping[str, Any]]] = []
        self.env: dict[str, str] = {}
        self.env = {k: self.sub(str(v)) for k, v in (self.job.get("env") or {}).items()}

    # -- expressions --------------------------------------------------------------
    def value(self, expr: str) -> Any:
        def hash_files(*patterns: str) -> str:
            h = hashlib.sha256()
            found = False
            for pat in patterns:
                for p in sorted(self.workspace.glob(pat)):
                    if p.is_file():
                        h.update(p.read_bytes())
                        found = True
            return h.hexdigest() if found else ""

        scope = {
            "github": _Ctx(self.github), "env": _Ctx(self.env), "runner": _Ctx({"os": "Linux"}),
            "steps": _Ctx(self.steps), "success": lambda: self.ok,
            "failure": lambda: not self.ok, "always": lambda: True,
            "cancelled": lambda: False, "hashFiles": hash_files,
            "true": True, "false": False, "null": None,
        }
        # the expressions are the workflow file's own (a repository file), no input
        return eval(_translate(expr), {"__builtins__": {}}, scope)

    def sub(self, text: str) -> str:
        return _EXPR.sub(lambda m: str(self.value(m.group(1))), text)

    def condition(self, step: Mapping[str, Any]) -> bool:
        cond = step.get("if")
        if cond is None:
            return self.ok
        cond = str(cond).strip()
        m = _EXPR.fullmatch(cond)
        expr = m.group(1) if m else cond
        uses_status = re.search(r"\b(success|failure|always|cancelled)\(\)", expr)
        result = bool(self.value(expr))
        return result if uses_status else (result and self.ok)

    # -- steps --------------------------------------------------------------------
    def run_step(self, step: Mapping[str, Any]) -> StepResult:
        name = str(step.get("name") or step.get("uses") or step.get("run", "")[:40])
        if any(s in name for s in self.skip):
            return StepResult(name, ran=False, note="skipped (--skip)")
        if not self.condition(step):
            return StepResult(name, ran=False, note=f"if: {step.get('if', 'success()')}")
        if "run" in step:
            return self._run(name, step)
        return self._uses(name, step)

    def _run(self, name: str, step: Mapping[str, Any]) -> StepResult:
        script = self.sub(str(step["run"]))
        env_step = {k: self.sub(str(v)) for k, v in (step.get("env") or {}).items()}
        with tempfile.TemporaryDirectory(prefix="drive-") as tmp:
            out_file = Path(tmp) / "output"
            out_file.touch()
            body = Path(tmp) / "step.sh"
            body.write_text(script, encoding="utf-8")
            env = {**os.environ, **self.env, **env_step, **self.extra_env,
                   "GITHUB_OUTPUT": str(out_file), "GITHUB_STEP_SUMMARY": str(self.summary),
                   "GITHUB_WORKSPACE": str(self.workspace), "GITHUB_ACTIONS": "true",
                   "GITHUB_REF": self.github["ref"], "GITHUB_RUN_ID": self.github["run_id"],
                   "GITHUB_EVENT_NAME": self.github["event_name"], "CI": "true"}
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                                   str(body)], cwd=self.workspace, env=env, check=False)
            outputs = {}
            for line in out_file.read_text(encoding="utf-8").splitlines():
                if "=" in line:
                    k, v = line.split("=", 1)
                    outputs[k] = v
        if step.get("id"):
            self.steps[str(step["id"])] = {"outputs": outputs,
                                           "outcome": "success" if proc.returncode == 0
                                           else "failure"}
        if proc.returncode != 0 and not step.get("continue-on-error"):
            self.ok = False
        return StepResult(name, ran=True, code=proc.returncode, outputs=outputs)

    def _uses(self, name: str, step: Mapping[str, Any]) -> StepResult:
        uses = str(step["uses"])
        action = uses.split("@", 1)[0]
        w = {k: self.sub(str(v)) for k, v in (step.get("with") or {}).items()}
        if action in ("actions/cache/restore", "actions/cache"):
            note = self._restore(w)
            if action == "actions/cache":
                self.post.append(("save", w))
            return StepResult(name, ran=True, code=0, note=note)
        if action == "actions/cache/save":
            return StepResult(name, ran=True, code=0, note=self._save(w))
        if action == "actions/upload-artifact":
            dest = self.store / "artifacts" / w["name"]
            for line in w.get("path", "").splitlines():
                src = self.workspace / line.strip()
                if line.strip() and src.exists():
                    shutil.copytree(src, dest / line.strip(), dirs_exist_ok=True)
            return StepResult(name, ran=True, code=0, note=f"artefact {w['name']}")
        if action == "marocchino/sticky-pull-request-comment":
            body = (self.workspace / w["path"]).read_text(encoding="utf-8")
            target = self.store / f"pr-comment-{w.get('header', 'default')}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
            return StepResult(name, ran=True, code=0, note=f"comment kept as {target}")
        if action in ("actions/checkout", "actions/setup-python", "actions/setup-java"):
            return StepResult(name, ran=True, code=0, note="nothing to do locally")
        raise SystemExit(f"drive: no local emulation of {uses} (step {name!r})")

    def _restore(self, w: Mapping[str, str]) -> str:
        caches = self.store / "cache"
        key = w["key"]
        hit = caches / key if (caches / key).is_dir() else None
        if hit is None:
            prefixes = [p.strip() for p in w.get("restore-keys", "").splitlines() if p.strip()]
            entries = sorted((p for p in caches.glob("*") if p.is_dir()),
                             key=lambda p: p.stat().st_mtime, reverse=True) \
                if caches.is_dir() else []
            for pre in prefixes:
                hit = next((p for p in entries if p.name.startswith(pre)), None)
                if hit is not None:
                    break
        if hit is None:
            return f"cache miss ({key})"
        dest = self.workspace / w["path"]
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(hit, dest)
        return f"restored {hit.name}"

    def _save(self, w: Mapping[str, str]) -> str:
        src = self.workspace / w["path"]
        target = self.store / "cache" / w["key"]
        if target.exists():  # GitHub refuses to overwrite a key
            return f"key {w['key']} exists: not saved"
        if not src.exists():
            return f"{w['path']} does not exist: not saved"
        shutil.copytree(src, target)
        os.utime(target, (time.time(), time.time()))
        return f"saved as {w['key']}"


def drive(workflow: Path, workspace: Path, store: Path, *, ref: str = "refs/heads/main",
          event: str = "push", run_id: str = "1", extra_env: Mapping[str, str] | None = None,
          skip: Sequence[str] = (), log: Any = None) -> DriveResult:
    """Run the workflow's single job once; what each step did."""
    log = log if log is not None else sys.stderr
    r = _Runner(workflow, workspace, store, ref=ref, event=event, run_id=run_id,
                extra_env=extra_env or {}, skip=skip)
    results = []
    for step in r.job["steps"]:
        res = r.run_step(step)
        results.append(res)
        state = (f"exit {res.code}" if res.code is not None else "not run") + (
            f" ({res.note})" if res.note else "")
        print(f"drive: [{r.job_name}] {res.name}: {state}", file=log, flush=True)
    for kind, w in r.post:
        if kind == "save" and r.ok:
            print(f"drive: post: {r._save(w)}", file=log)
    return DriveResult(results, r.ok)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("workflow", type=Path)
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--store", type=Path, required=True,
                   help="where caches, artefacts and comments are kept between drives")
    p.add_argument("--ref", default="refs/heads/main")
    p.add_argument("--event", default="push")
    p.add_argument("--run-id", default=str(int(time.time())))
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--skip", action="append", default=[], metavar="TEXT")
    args = p.parse_args(argv)
    extra = dict(e.split("=", 1) for e in args.env)
    for k, v in extra.items():
        print(f"drive: env override {k}={v}", file=sys.stderr)
    res = drive(args.workflow, args.workspace.resolve(), args.store.resolve(), ref=args.ref,
                event=args.event, run_id=args.run_id, extra_env=extra, skip=args.skip)
    print(json.dumps({"success": res.success,
                      "steps": [{"name": s.name, "code": s.code, "outputs": s.outputs}
                                for s in res.steps if s.ran]}))
    return 0 if res.success else 1


if __name__ == "__main__":
    raise SystemExit(main())
