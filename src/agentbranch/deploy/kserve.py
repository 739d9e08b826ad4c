"""KServe / OpenShift AI ``InferenceService`` manifests sized by a plan. Each names the
shared vLLM ``ServingRuntime`` ``vllm-diffusiongemma`` (shipped in the package: the read
settings every checkpoint shares) and carries what the plan decides for its GPU: the
served canvas, ``--max-num-seqs``, ``--max-model-len`` and ``--gpu-memory-utilization``.
"""

from __future__ import annotations

import json
import re

from agentbranch.engine.capacity.sizing import SizingPlan
from agentbranch.engine.presets import EnginePreset, get_preset

__all__ = [
    "RUNTIME_FILE",
    "RUNTIME_NAME",
    "inferenceservice_file",
    "kserve_manifest",
    "servingruntime_manifest",
]

#: The ServingRuntime every InferenceService here names, and its file in the package.
RUNTIME_NAME = "vllm-diffusiongemma"
RUNTIME_FILE = "servingruntime-vllm-diffusiongemma.yaml"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

_GPU_NOTES = {
    "fp8": (
        "FP8-dynamic (RedHatAI)",
        "# FP8 needs an Ada/Hopper-class GPU or newer (L40S, H100, H200).",
    ),
    "nvfp4": (
        "NVFP4 (RedHatAI)",
        "# NVFP4 needs a Blackwell-class GPU (FP4 tensor cores: B200, RTX PRO 6000).",
    ),
    "bf16": ("BF16 (Google)", "# BF16 needs an 80 GB-class GPU (H100, H200, A100 80GB, B200)."),
}


def inferenceservice_file(name: str) -> str:
    """The file name ``agentbranch deploy kserve -o DIR/`` gives an InferenceService."""
    return f"inferenceservice-{name}.yaml"


def servingruntime_manifest() -> str:
    """The ``ServingRuntime`` YAML (``vllm-diffusiongemma``) the InferenceServices name."""
    from importlib.resources import files

    return files("agentbranch.deploy").joinpath(RUNTIME_FILE).read_text("utf-8")


def kserve_manifest(
    preset: str | EnginePreset,
    plan: SizingPlan,
    *,
    name: str | None = None,
    command: str | None = None,
    filename: str | None = None,
) -> str:
    """The ``InferenceService`` YAML for ``preset`` sized by ``plan`` (one GPU).

    ``command`` is written into the header so the file says how to regenerate it;
    ``filename`` is the name it is saved as (the header's ``oc apply`` line; default
    :func:`inferenceservice_file`). It names the ServingRuntime ``vllm-diffusiongemma``
    (:func:`servingruntime_manifest`), which must be applied too.
    """
    from agentbranch.core.errors import ConfigurationError

    p = get_preset(preset)
    precision = p.name.split("-", 1)[1]
    name = p.name if name is None else name  # "diffusiongemma-fp8"
    if not _NAME.match(name):
        raise ConfigurationError(
            f"InferenceService name {name!r} must be a DNS label: lower-case letters, digits "
            "and '-', at most 63, starting and ending with a letter or digit"
        )
    bound = "a denoising step's logits" if plan.bound_by == "step" else "the KV cache"
    header = [
        f"# DiffusionGemma 26B-A4B, {_GPU_NOTES[precision][0]}, on one GPU of {plan.gpu_gib:g} GiB.",
        _GPU_NOTES[precision][1],
        f"# Sized by agentbranch: canvas {plan.canvas_length}, at most {plan.max_num_seqs} "
        f"concurrent sequences ({bound} bound them;",
        f"# weights {plan.term('weights').gib:.1f} GiB, KV cache "
        f"{plan.term('kv_cache').gib:.1f} GiB). For another GPU or question schema:",
        f"#   {command or f'agentbranch deploy kserve --preset {precision} --gpu-gib {plan.gpu_gib:g}'}",
        "#",
        f"# Runs on the ServingRuntime {RUNTIME_NAME} ({RUNTIME_FILE},",
        "# written beside this file by `agentbranch deploy kserve -o DIR/`). Apply both:",
        f"#   oc apply -n <namespace> -f {RUNTIME_FILE}",
        f"#   oc apply -n <namespace> -f {filename or inferenceservice_file(name)}",
        f"#   oc get inferenceservice {name} -o jsonpath='{{.status.url}}'",
        "#",
        "# Then, in the agent workers:",
        f'#   RemoteReader("<status.url>", model="{name}", api_key=<token>)',
    ]
    # Host memory: the weights pass through it while loading, plus the server.
    memory = -(-int(plan.term("weights").gib) // 8) * 8 + 16
    node_selector = (
        "    # Schedule on Blackwell nodes only (label set by the NVIDIA GPU operator).\n"
        "    nodeSelector:\n"
        "      nvidia.com/gpu.family: blackwell\n"
        if precision == "nvfp4"
        else ""
    )
    canvas = json.dumps({"canvas_length": plan.canvas_length}, separators=(",", ":"))
    body = f"""apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {name}
  annotations:
    openshift.io/display-name: DiffusionGemma {precision.upper()} (decisions)
    serving.kserve.io/deploymentMode: RawDeployment
    # OpenShift AI: require a bearer token (RemoteReader api_key=...).
    security.opendatahub.io/enable-auth: "true"
  labels:
    opendatahub.io/dashboard: "true"
    # Expose a route outside the cluster; drop to keep it cluster-internal.
    networking.kserve.io/visibility: exposed
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 1
    model:
      modelFormat:
        name: vLLM
      runtime: {RUNTIME_NAME}
      # Hugging Face (KServe >= 0.15 storage initializer), or a modelcar image
      # (oci://...) / a PVC (pvc://<claim>/<path>) on disconnected clusters.
      storageUri: hf://{p.model}
      args:
        - --diffusion-config={canvas}
        - --max-num-seqs={plan.max_num_seqs}
        - --max-model-len={plan.max_model_len}
        - --gpu-memory-utilization={plan.gpu_memory_utilization:g}
      resources:
        requests:
          cpu: "4"
          memory: {memory}Gi
          nvidia.com/gpu: "1"
        limits:
          cpu: "8"
          memory: {memory + 16}Gi
          nvidia.com/gpu: "1"
{node_selector}    tolerations:
      - key: nvidia.com/gpu
        operator: Exists
        effect: NoSchedule
"""
    return "\n".join(header) + "\n" + body
