#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): agentbranch's TransformersReader on CUDA with
# DiffusionGemma's published 26B-A4B shape (random weights, bf16, built on the GPU), the
# seed's read (one denoising step, 32-token canvas, 3 questions per request) at
# concurrency 1, 8 and 32 through DecisionEngine.decide_many and its coalescer, beside a
# plain batched forward of the same model, and the tiny test model's reads on CUDA
# against the CPU's. Prints the figures and writes gpu_check.json to $OUT.
#
#   bash scripts/gpu_check.sh --prepare        # here, once: the wheelhouse .gpu-wheels/
#   bash scripts/gpu_check.sh [ARGS]           # on the GPU machine (ARGS: gpu_check.py's)
#   bash scripts/gpu_check.sh --scale small --device cpu   # anywhere, in seconds
#
# The GPU machine has Python 3.12, PyTorch, Triton and transformers but no network and
# not agentbranch's other dependencies. `--prepare` downloads the pure-Python wheels
# (and the two compiled ones, pydantic-core and uuid-utils, for CPython 3.12 on x86-64
# manylinux) that importing agentbranch, TransformersReader and DecisionEngine needs
# there into .gpu-wheels/ (git-ignored, about 5 MiB; never torch, transformers or
# nvidia packages). A run installs them into a private folder ($GPU_CHECK_SITE, put on
# PYTHONPATH for this run only) when the Python it runs lacks them.
#
# The device call, from the repository root of the checkout the session runs in, after
# `bash scripts/gpu_check.sh --prepare` there (it takes about 2-3 minutes of the
# machine's time plus its start; the limit leaves room for a second run in 15 minutes):
#
#   run(command="bash scripts/gpu_check.sh", carry=[".gpu-wheels"], timeout_s=300)
#
# The figures come back as gpu_check.json in the reply's files (written after each
# step, so a run stopped at its limit still returns what it measured).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
WHEELS="${GPU_CHECK_WHEELS:-.gpu-wheels}"
SITE="${GPU_CHECK_SITE:-${TMPDIR:-/tmp}/agentbranch-gpu-check-site}"
# What importing agentbranch + TransformersReader + DecisionEngine and running the check
# need beyond the GPU machine's own packages (its image has torch, transformers 5.17,
# tokenizers, safetensors, numpy, jinja2, requests, httpx, xxhash, rich, typer ... but
# not these), at the versions the project tests with: found by running the small check
# in a venv that held only such packages (torch, transformers 5.17 and their needs) and
# these wheels. typing-extensions comes along because pydantic needs a recent one.
PACKAGES=(
    langchain-core==1.8.3
    langchain-protocol==0.0.20
    langsmith==0.15.1
    pydantic==2.14.4
    pydantic-core==2.50.5
    annotated-types==0.8.0
    typing-inspection==0.4.5
    typing-extensions==4.16.0
    jsonpatch==1.48
    jsonpointer==3.12
    uuid-utils==0.19.0
    sniffio==1.3.1
    distro==1.9.0
    requests-toolbelt==1.0.0
)

if [[ "${1:-}" == "--prepare" ]]; then
    # GPU_WHEELS_PYTHON picks another CPython for the compiled wheels (3.12: the machine's).
    version="${GPU_WHEELS_PYTHON:-3.12}"
    rm -rf "$WHEELS"
    mkdir -p "$WHEELS"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version "$version" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$WHEELS" "${PACKAGES[@]}"
    ls "$WHEELS"
    du -sh "$WHEELS"
    exit 0
fi

# Install the wheels only where this Python cannot import agentbranch's dependencies.
needs="import langchain_core, langsmith, pydantic, jsonpatch, uuid_utils"
if ! "$PYTHON" -c "$needs" 2>/dev/null; then
    shopt -s nullglob
    wheels=("$WHEELS"/*.whl)
    if [[ ${#wheels[@]} -eq 0 ]]; then
        echo "gpu_check: agentbranch's dependencies are missing and $WHEELS holds no wheels;" \
            "run 'bash scripts/gpu_check.sh --prepare' where pip can reach the index," \
            "and carry $WHEELS along" >&2
        exit 2
    fi
    "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$SITE" "${wheels[@]}"
    echo "gpu_check: installed ${#wheels[@]} wheels from $WHEELS into $SITE"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
exec "$PYTHON" benchmarks/gpu_check.py "$@"
