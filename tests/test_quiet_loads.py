"""The loads the library makes print nothing (transformers' tqdm bars and warnings are
held back for the loading thread only), and nobody else's bars or settings change."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from transformers.utils import logging as hf_logging

from agentbranch.engine.quiet_loads import quiet_loads  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    block = re.search(r"## Quickstart.*?```python\n(.*?)```", readme, re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_quickstart_prints_only_its_own_line(tmp_path: Path):
    code = _quickstart()
    assert "TransformersReader.from_pretrained" in code  # the load this is about
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    env["TMPDIR"] = str(tmp_path)  # a fresh tiny checkpoint: "Writing model shards" too
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no "Loading weights", no "Writing model shards"
    assert len(done.stdout.splitlines()) == 1


def _bar_kind(out: dict, name: str, file: io.StringIO) -> None:
    bar = hf_logging.tqdm(range(3), file=file, desc=name)
    out[name] = type(bar).__name__
    list(bar)


def test_only_the_loading_thread_is_quiet():
    assert hf_logging.is_progress_bar_enabled()
    kinds: dict[str, str] = {}
    inside, release = threading.Event(), threading.Event()
    theirs = io.StringIO()

    def load():
        with quiet_loads():
            _bar_kind(kinds, "ours", io.StringIO())
            inside.set()
            release.wait(10)

    loader = threading.Thread(target=load)
    loader.start()
    assert inside.wait(10)
    _bar_kind(kinds, "theirs", theirs)  # another thread, during the load
    release.set()
    loader.join()
    assert kinds["ours"] == "EmptyTqdm" and "tqdm" in kinds["theirs"]
    assert kinds["theirs"] != "EmptyTqdm"
    assert "theirs" in theirs.getvalue()
    assert hf_logging.is_progress_bar_enabled()  # the user's switch never moved
    assert hf_logging.set_tqdm_hook(None) is None  # and no hook of ours is left behind


def test_a_users_own_hook_keeps_working_and_stays():
    seen = []

    def their_hook(factory, args, kwargs):
        seen.append(kwargs.get("desc"))
        return factory(*args, **kwargs)

    hf_logging.set_tqdm_hook(their_hook)
    try:
        with quiet_loads():
            with quiet_loads():  # nested blocks restore once, at the outer one
                list(hf_logging.tqdm(range(2), desc="inside"))
            t = threading.Thread(
                target=lambda: list(hf_logging.tqdm(range(2), desc="other", file=io.StringIO()))
            )
            t.start()
            t.join()
        list(hf_logging.tqdm(range(2), desc="after", file=io.StringIO()))
        assert seen == ["other", "after"]
    finally:
        assert hf_logging.set_tqdm_hook(None) is their_hook


def test_warnings_from_the_loading_thread_are_held_back_errors_are_not():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    child = logging.getLogger("transformers.modeling_utils")
    try:
        with quiet_loads():
            child.warning("config note from the load")
            child.error("a real failure")
            t = threading.Thread(target=lambda: child.warning("another thread's warning"))
            t.start()
            t.join()
        child.warning("after the load")
    finally:
        logger.removeHandler(handler)
    printed = stream.getvalue()
    assert "config note" not in printed
    assert "a real failure" in printed
    assert "another thread's warning" in printed and "after the load" in printed
    assert handler.filters == []
