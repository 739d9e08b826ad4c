"""Engine selection from the environment, for ``DecisionEngine.from_env()``.

``select`` decides from the ``AGENTBRANCH_*`` variables (``EngineSettings``) which
reader to build, with a readable reason; ``build_reader`` builds it.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.redact import redact_url

if TYPE_CHECKING:
    from agentbranch.engine.readers.base import Reader

__all__ = [
    "ENV_CALIBRATION",
    "ENV_ENGINE",
    "ENV_REMOTE_API_KEY",
    "ENV_REMOTE_DIALECT",
    "ENV_REMOTE_MODEL",
    "ENV_REMOTE_URL",
    "ENV_VLLM_MODEL",
    "EngineKind",
    "EngineSettings",
    "Selection",
    "build_reader",
    "reader_from_env",
    "select",
]

log = logging.getLogger("agentbranch")

EngineKind = Literal["vllm", "remote", "embedded"]

ENV_ENGINE = "AGENTBRANCH_ENGINE"
ENV_VLLM_MODEL = "AGENTBRANCH_VLLM_MODEL"
ENV_REMOTE_URL = "AGENTBRANCH_REMOTE_URL"
ENV_REMOTE_MODEL = "AGENTBRANCH_REMOTE_MODEL"
ENV_REMOTE_API_KEY = "AGENTBRANCH_REMOTE_API_KEY"
ENV_REMOTE_DIALECT = "AGENTBRANCH_REMOTE_DIALECT"
ENV_CALIBRATION = "AGENTBRANCH_CALIBRATION"


class EngineSettings(BaseSettings):
    """The ``AGENTBRANCH_*`` variables, read by pydantic-settings (case-insensitive names;
    blank values count as unset). ``EngineSettings.from_env(mapping)`` reads a mapping
    instead of ``os.environ``; neither reads ``.env`` files."""

    model_config = SettingsConfigDict(env_prefix="AGENTBRANCH_", extra="ignore")

    engine: str | None = None
    vllm_model: str | None = None
    remote_url: str | None = None
    remote_model: str | None = None
    remote_api_key: SecretStr | None = None
    remote_dialect: str | None = None
    calibration: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    def __repr_args__(self) -> Any:
        # The URL may carry credentials (user:password@, ?token=): masked in repr/str.
        for name, value in super().__repr_args__():
            yield name, redact_url(value) if name == "remote_url" and value else value

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> EngineSettings:
        """Settings from ``env`` (default ``os.environ``)."""
        if env is None:
            return cls()
        prefix = cls.model_config["env_prefix"].lower()
        named = {k.lower(): v for k, v in env.items()}
        # Every field given (None where ``env`` lacks it), so os.environ fills none.
        return cls.model_validate({field: named.get(prefix + field) for field in cls.model_fields})


@dataclass(frozen=True)
class Selection:
    """Which reader the environment asks for, and why (nothing loaded yet)."""

    kind: EngineKind
    reason: str
    #: What the reader is built with (the remote URL and API key included): not in repr.
    settings: dict[str, str] = field(default_factory=dict, repr=False)
    #: Why the engines before it were passed over.
    skipped: tuple[str, ...] = ()


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA install: "no CUDA"
        return False


def select(
    env: Mapping[str, str] | None = None,
    *,
    cuda_available: bool | None = None,
    vllm_importable: bool | None = None,
) -> Selection:
    """Decide which reader to build from ``env`` (default ``os.environ``); the CUDA and
    vllm-import probes can be overridden for tests. First match wins: **vLLM** when
    ``AGENTBRANCH_VLLM_MODEL`` names a checkpoint or preset, CUDA is visible and ``vllm``
    imports; **remote** when ``AGENTBRANCH_REMOTE_URL`` is set (with
    ``AGENTBRANCH_REMOTE_MODEL``, ``_API_KEY`` and ``_DIALECT=vllm|spec``); else
    **embedded** (MiniLM on CPU, offline). ``AGENTBRANCH_ENGINE`` forces one, and a forced
    engine that cannot run raises ``ConfigurationError``. The reason shows the remote URL
    with its credentials masked (``redact_url``).
    """
    settings = EngineSettings.from_env(env)
    forced = settings.engine.lower() if settings.engine else None
    if forced not in (None, "vllm", "remote", "embedded"):
        raise ConfigurationError(
            f"{ENV_ENGINE}={settings.engine!r} is not an engine; use vllm, remote or "
            "embedded, or unset it to choose automatically"
        )
    skipped: list[str] = []

    vllm_model = settings.vllm_model
    if forced in (None, "vllm"):
        if not vllm_model:
            why = f"vLLM: {ENV_VLLM_MODEL} is not set"
        else:
            cuda = _cuda_available() if cuda_available is None else cuda_available
            has_vllm = vllm_importable
            if has_vllm is None:
                has_vllm = importlib.util.find_spec("vllm") is not None
            if cuda and has_vllm:
                return Selection(
                    "vllm",
                    f"vLLM with {vllm_model}: {ENV_VLLM_MODEL} is set, a CUDA device is "
                    "visible and vllm is installed",
                    {"model": vllm_model},
                )
            missing = []
            if not cuda:
                missing.append("no CUDA device is visible")
            if not has_vllm:
                missing.append("vllm is not installed (pip install 'agentbranch[vllm]')")
            why = f"vLLM: {ENV_VLLM_MODEL}={vllm_model} is set but " + " and ".join(missing)
        if forced == "vllm":
            raise ConfigurationError(f"{ENV_ENGINE}=vllm but {why.split(': ', 1)[1]}")
        skipped.append(why)

    url = settings.remote_url
    if forced in (None, "remote"):
        if url:
            model = settings.remote_model
            remote = {"base_url": url}
            if model:
                remote["model"] = model
            if settings.remote_api_key is not None:
                remote["api_key"] = settings.remote_api_key.get_secret_value()
            dialect = (settings.remote_dialect or "vllm").lower()
            if dialect not in ("vllm", "spec"):
                raise ConfigurationError(
                    f"{ENV_REMOTE_DIALECT}={settings.remote_dialect!r} is not a dialect; use "
                    "vllm (a vLLM server) or spec (a server that speaks the published "
                    "System One spec), or unset it for vllm"
                )
            if dialect == "spec":
                if not model:
                    raise ConfigurationError(
                        f"{ENV_REMOTE_DIALECT}=spec needs {ENV_REMOTE_MODEL}: a System One "
                        "spec request names its model (e.g. jev-latest)"
                    )
                remote["dialect"] = dialect
            return Selection(
                "remote",
                f"remote /v1/systemone at {redact_url(url)}"
                + (" (System One spec dialect)" if dialect == "spec" else "")
                + (f" (model {model})" if model else "")
                + f": {ENV_REMOTE_URL} is set",
                remote,
                tuple(skipped),
            )
        if forced == "remote":
            raise ConfigurationError(
                f"{ENV_ENGINE}=remote but {ENV_REMOTE_URL} is not set; point it at a "
                "server with /v1/systemone (e.g. http://localhost:8000)"
            )
        skipped.append(f"remote: {ENV_REMOTE_URL} is not set")

    reason = "embedded CPU reader (all-MiniLM-L6-v2, offline)"
    reason += f": forced by {ENV_ENGINE}" if forced == "embedded" else ": " + "; ".join(skipped)
    return Selection("embedded", reason, {}, tuple(skipped))


def build_reader(selection: Selection) -> Reader:
    """Construct the reader a ``Selection`` names (loads vllm / the model lazily)."""
    if selection.kind == "vllm":
        try:
            from agentbranch.engine.readers.vllm import VLLMReader
        except ImportError as e:
            raise ConfigurationError(
                f"the vLLM reader could not be imported ({e}); install vllm "
                "(pip install 'agentbranch[vllm]') on a CUDA machine, or unset "
                f"{ENV_VLLM_MODEL} to use another engine"
            ) from e
        from agentbranch.engine.presets import PRESETS

        model = selection.settings["model"]
        return VLLMReader(preset=model) if model in PRESETS else VLLMReader(model)
    if selection.kind == "remote":
        try:
            from agentbranch.engine.readers.remote import RemoteReader
        except ImportError as e:
            raise ConfigurationError(
                f"the remote reader could not be imported ({e}); unset {ENV_REMOTE_URL} "
                "to use the embedded reader"
            ) from e
        kwargs = dict(selection.settings)
        return RemoteReader(kwargs.pop("base_url"), **kwargs)
    from agentbranch.engine.readers.embedded import EmbeddedReader

    return EmbeddedReader()


def reader_from_env(env: Mapping[str, str] | None = None) -> tuple[Reader, str, str | None]:
    """The reader ``env`` (default ``os.environ``) asks for, why, and the calibration file
    ``AGENTBRANCH_CALIBRATION`` names (``None`` if unset).
    ``DecisionEngine.from_env()`` builds the engine on it."""
    selection = select(env)
    return build_reader(selection), selection.reason, EngineSettings.from_env(env).calibration
