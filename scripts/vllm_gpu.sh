#!/usr/bin/env bash
# The vLLM tier's DiffusionGemma tests on a CUDA machine, on real Triton (no shim, no
# interpreter): VLLMReader's diffusion path end to end on vLLM's own DiffusionGemma.
#
#   bash scripts/vllm_gpu.sh                 # a tiny random model built at test time
#   AGENTBRANCH_DGEMMA_CHECKPOINT=/models/diffusiongemma-26B-A4B-it-FP8-dynamic \
#       bash scripts/vllm_gpu.sh             # the real checkpoint (a local folder)
#   bash scripts/vllm_gpu.sh -k joint        # extra args go to pytest
#
# Sets up .venv-vllm-gpu once (VLLM_GPU_VENV to change): vLLM 0.32 (CUDA build, with the
# CUDA torch it pins), agentbranch editable with its deps, pytest, and vLLM 0.33's
# decisions sources from the vllm==0.33.0 wheel (the joint-read parity tests). With the
# real checkpoint the transformers parity tests skip (they need the tiny weights); the
# tests against vLLM's own DiffusionGemmaCanvasStrategy and the rest run on it.
# AGENTBRANCH_DGEMMA_DTYPE overrides the dtype (default: float32 for the tiny model,
# the checkpoint's own for the real one). Do not run this on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=${VLLM_GPU_VENV:-.venv-vllm-gpu}
VLLM_PIN=${VLLM_PIN:-vllm==0.32.0}
VLLM_REF_VERSION="0.33.0"
PY="$VENV/bin/python"
PIP=("$PY" -m pip install -q --disable-pip-version-check)
STAMP="$VENV/.ready-$(cat scripts/vllm_gpu.sh pyproject.toml | sha256sum | cut -c1-16)"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "vllm_gpu.sh: no NVIDIA GPU here; on CPU run scripts/vllm_tier.sh" >&2
    exit 2
fi
if [[ ! -f "$STAMP" ]]; then
    echo "vllm gpu tier: setting up $VENV" >&2
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$PY" -m pip install -q --disable-pip-version-check --upgrade pip
    "${PIP[@]}" "$VLLM_PIN" "transformers>=5.11,<5.20"
    "${PIP[@]}" -e . "pytest>=8" "pytest-asyncio>=0.23"
    tmp=$(mktemp -d)
    "$PY" -m pip download -q --disable-pip-version-check --no-deps \
        "vllm==$VLLM_REF_VERSION" -d "$tmp"
    "$PY" scripts/extract_vllm_ref.py "$(ls "$tmp"/vllm-"$VLLM_REF_VERSION"-*.whl)" \
        "$VENV/vllm-$VLLM_REF_VERSION-src"
    rm -rf "$tmp"
    touch "$STAMP"
fi
if [[ -n "${AGENTBRANCH_DGEMMA_CHECKPOINT:-}" && ! -f "$AGENTBRANCH_DGEMMA_CHECKPOINT/config.json" ]]; then
    echo "vllm_gpu.sh: AGENTBRANCH_DGEMMA_CHECKPOINT=$AGENTBRANCH_DGEMMA_CHECKPOINT is not a" \
        "local checkpoint folder (no config.json); download it first (hf download ...)" >&2
    exit 2
fi

export VLLM_REF_SRC="$(cd "$VENV" && pwd)/vllm-$VLLM_REF_VERSION-src"   # VENV may be relative or absolute
echo "== vLLM GPU tier: DiffusionGemma tests on $VLLM_PIN with real Triton" \
    "(${AGENTBRANCH_DGEMMA_CHECKPOINT:-tiny random model}) =="
exec "$PY" -m pytest -v -p no:cacheprovider -o addopts="-ra" \
    tests/vllm_tier/test_diffusiongemma_vllm.py tests/vllm_tier/test_diffusiongemma_window.py "$@"
