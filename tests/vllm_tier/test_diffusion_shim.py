"""The tier's DiffusionGemma shim switches itself off where Triton has a real backend,
so the same tests run unchanged on a GPU machine (``diffusion_shim/``)."""

from __future__ import annotations

import importlib.metadata
import os
from types import SimpleNamespace

import pytest
import vllm_cpu_diffusion_shim as shim


def test_active_in_this_tier():
    """Here (CPU torch, registry triton): Triton runs through the interpreter backend."""
    import torch
    from vllm.triton_utils import HAS_TRITON

    if torch.cuda.is_available():
        pytest.skip("a GPU machine: the shim is off (see the tests below)")
    assert shim.STATE["triton_cpu_backend"] and HAS_TRITON
    assert os.environ.get("TRITON_INTERPRET") == "1"


def test_off_with_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert shim._triton_needs_shim() is False


def test_off_with_tritons_own_cpu_backend(monkeypatch):
    import torch

    real = importlib.metadata.entry_points
    cpu = SimpleNamespace(name="cpu", value="triton.backends.cpu")

    def entry_points(**kw):
        return [cpu, *real(**kw)] if kw.get("group") == "triton.backends" else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert shim._triton_needs_shim() is False
    monkeypatch.setattr(importlib.metadata, "entry_points", real)
    assert shim._triton_needs_shim() is True


def test_no_backend_registered_next_to_an_active_driver(monkeypatch):
    from triton.backends import backends

    active = SimpleNamespace(driver=SimpleNamespace(is_active=lambda: True), compiler=None)
    saved = dict(backends)
    try:
        backends.clear()
        backends["nvidia"] = active
        shim._register_triton_cpu_backend()
        assert set(backends) == {"nvidia"}
        backends.clear()  # no active driver: the interpreter backend goes in
        shim._register_triton_cpu_backend()
        assert set(backends) == {"cpu"}
        assert backends["cpu"].driver.is_active()
        assert backends["cpu"].driver().get_current_target().backend == "cpu"
    finally:
        backends.clear()
        backends.update(saved)


def test_torchvision_left_alone_with_a_gpu_torch(monkeypatch):
    import sys

    import torch

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    name = "torchvision._meta_registrations"
    before = sys.modules.get(name)
    monkeypatch.delitem(sys.modules, name, raising=False)
    shim._stub_torchvision()
    assert name not in sys.modules
    if before is not None:
        sys.modules[name] = before
