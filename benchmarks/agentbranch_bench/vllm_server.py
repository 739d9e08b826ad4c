"""vLLM's OpenAI server on a free loopback port, built like the in-process ``LLM`` so
their reads agree, and the tiny Qwen3 the vLLM tier builds (from a checkout)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["VLLM_ARGS", "tier_qwen3", "vllm_server"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: The in-process LLM and the server are built alike so their reads agree.
VLLM_ARGS: dict[str, Any] = {
    "enforce_eager": True,
    "dtype": "float32",
    "max_model_len": 2048,
    "kv_cache_memory_bytes": 256 * 2**20,
    "seed": 0,
}


@contextlib.contextmanager
def vllm_server(model: Path, served: str, log: Path) -> Iterator[str]:
    """vLLM's OpenAI server for ``model`` on a free loopback port (stopped on exit)."""
    import httpx

    port = _free_port()
    args = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", served,
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--dtype", VLLM_ARGS["dtype"],
        "--max-model-len", str(VLLM_ARGS["max_model_len"]),
        "--kv-cache-memory-bytes", str(VLLM_ARGS["kv_cache_memory_bytes"]),
        "--seed", str(VLLM_ARGS["seed"]),
    ]  # fmt: skip
    with open(log, "w") as out:
        env = {
            **os.environ,
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "VLLM_CACHE_ROOT": str(log.parent / "vllm-cache"),
        }
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the vLLM server exited; see {log}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the vLLM server did not start; see {log}")
                time.sleep(0.5)
            yield url
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)


def tier_qwen3(folder: Path) -> Path | None:
    """The vLLM tier's tiny Qwen3, when running from a checkout."""
    here = Path(__file__).resolve().parents[2] / "tests" / "vllm_tier" / "tiny_qwen3.py"
    if not here.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_agentbranch_tiny_qwen3", here)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build_tiny_qwen3(folder)
    return folder
