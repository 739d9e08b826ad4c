"""Runs one session of a page's snippets (tests/_doc_pages.py) in this fresh process.

    python tests/_doc_runner.py SPEC.json RESULT.json     # cwd: the session directory

SPEC holds the session's blocks in page order; RESULT gets, per block line, what it printed
on stdout and on stderr (file descriptors 1 and 2, so subprocesses and log handlers count)
and the traceback if it failed. After a failure the rest of the session is not run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import _doc_hooks


def _captured(step) -> tuple[str, str, str | None]:
    """Runs ``step`` with fds 1 and 2 in files: (stdout, stderr, traceback or None)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        error = None
        try:
            step()
        except (Exception, SystemExit):
            error = traceback.format_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        printed = []
        for f in (out, err):
            f.seek(0)
            printed.append(f.read().decode("utf-8", "replace"))
        return printed[0], printed[1], error


def agentbranch(command: str, env: dict[str, str] | None = None) -> None:
    """``agentbranch ARGS`` as a reader would type it; output on this process's fds."""
    args = shlex.split(command, comments=True)
    assert args[0] == "agentbranch", f"not an agentbranch command: {command!r}"
    sys.stdout.flush()
    done = subprocess.run(
        [sys.executable, "-m", "agentbranch.cli", *args[1:]],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{command!r} exited with status {done.returncode}"


def _console(body: str) -> None:
    words = body.split("\n", 1)[0].removeprefix("$ ").split()
    env = {}
    while "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    agentbranch(" ".join(words), env)


def _python(block: dict, namespace: dict) -> None:
    d = block["directives"]
    if "setup" in d:
        getattr(_doc_hooks, d["setup"])(namespace)
    # Line numbers in a traceback are the page's.
    code = compile("\n" * block["line"] + block["body"], block["path"], "exec")
    exec(code, namespace)
    if "check" in d:
        getattr(_doc_hooks, d["check"])(namespace)


def run(block: dict, namespace: dict) -> None:
    d = block["directives"]
    if "file" in d:  # written before the session started; it must at least parse
        if d["file"].endswith(".json"):
            json.loads(block["body"])
        else:
            compile(block["body"], d["file"], "exec")
    if "scenario" in d:
        getattr(_doc_hooks, d["scenario"])(block["body"], namespace)
    elif "file" in d:
        pass
    elif block["lang"] == "python":
        _python(block, namespace)
    elif block["lang"] == "bash":
        for line in block["body"].splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                agentbranch(line)
    elif block["lang"] == "console":
        _console(block["body"])
    else:
        raise ValueError(f"cannot run a {block['lang']!r} block")
    for name in d.get("creates", "").split():
        assert Path(name).is_file(), f"the block did not create {name}"


def main(spec_path: str, result_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text("utf-8"))
    for block in spec:
        if "file" in block["directives"]:
            path = Path(block["directives"]["file"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block["body"], "utf-8")
    sys.stdout.reconfigure(line_buffering=True)
    namespace: dict = {"__name__": "__main__"}
    results: dict[int, dict] = {}
    failed = None
    for block in spec:
        if failed is not None:
            results[block["line"]] = {"error": f"not run: line {failed} failed"}
            continue
        out, err, error = _captured(lambda b=block: run(b, namespace))
        results[block["line"]] = {"stdout": out, "stderr": err, "error": error}
        if error is not None:
            failed = block["line"]
    Path(result_path).write_text(json.dumps(results), "utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
