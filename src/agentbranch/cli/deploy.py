"""``agentbranch size`` and ``agentbranch deploy kserve``: capacity plans on the command line."""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from agentbranch.cli.common import err, exit_on_error

__all__ = ["deploy_app", "size_command"]

deploy_app = typer.Typer(
    help="Serving manifests sized for a GPU and a question schema.", no_args_is_help=True
)

Preset = Annotated[str, typer.Option(help="Engine preset: fp8, nvfp4 or bf16.")]
GpuGib = Annotated[float, typer.Option("--gpu-gib", help="GPU memory, GiB (an 80 GB H100: 80).")]
Canvas = Annotated[
    int | None, typer.Option(help="The served canvas (default: what --questions needs, else 64).")
]
Questions = Annotated[
    Path | None,
    typer.Option(
        help="The questions file, JSON {id: question} (docs/questions.md): size for its canvas."
    ),
]
Single = Annotated[
    bool, typer.Option("--single", help="The schema is read one question per canvas (not joint).")
]
Util = Annotated[float, typer.Option(help="vLLM's gpu_memory_utilization.")]
Prompt = Annotated[int, typer.Option(help="Typical prompt tokens (state + questions + template).")]
MaxLen = Annotated[int | None, typer.Option(help="vLLM's max_model_len (default: 8192).")]
Weights = Annotated[float | None, typer.Option(help="Measured weights, GiB (vLLM logs it).")]
Activation = Annotated[float, typer.Option(help="vLLM's profiled reserve besides weights, GiB.")]
MaxCanvas = Annotated[
    int | None, typer.Option(help="Serve at most this canvas (joint reads are chunked to it).")
]
TokenizerDir = Annotated[
    Path | None,
    typer.Option(
        "--tokenizer", help="The model's tokenizer folder: count --questions lines with it."
    ),
]


def _encode(tokenizer: Path | None) -> Any:
    if tokenizer is None:
        return None
    from agentbranch.core.errors import ConfigurationError

    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(tokenizer))
    except (OSError, ValueError) as e:
        raise ConfigurationError(f"cannot load a tokenizer from {tokenizer}: {e}") from None
    return lambda text: tok.encode(text, add_special_tokens=False)


@dataclass(frozen=True)
class _Sizing:
    """The flags ``size`` and ``deploy kserve`` share: what the plan is sized for."""

    gpu_gib: GpuGib
    preset: Preset = "fp8"
    canvas_length: Canvas = None
    questions: Questions = None
    single: Single = False
    gpu_memory_utilization: Util = 0.90
    prompt_tokens: Prompt = 1024
    max_model_len: MaxLen = None
    weights_gib: Weights = None
    activation_gib: Activation = 2.0
    max_canvas: MaxCanvas = None
    tokenizer: TokenizerDir = None


def _sized(command: Callable[..., None]) -> Callable[..., None]:
    """``command(sizing, **own_flags)`` as a typer command whose flags are the sizing
    flags, then its own (typer reads a command's flags from its signature and passes
    every one by name)."""
    shared = list(inspect.signature(_Sizing, eval_str=True).parameters.values())
    own = inspect.signature(command, eval_str=True)
    signature = own.replace(parameters=shared + list(own.parameters.values())[1:])

    @functools.wraps(command)
    def run(**flags: Any) -> None:
        command(_Sizing(**{p.name: flags.pop(p.name) for p in shared}), **flags)

    run.__signature__ = signature  # type: ignore[attr-defined]
    return run


def _plan(sizing: _Sizing, model_config: Path | None = None) -> tuple[Any, Any]:
    from agentbranch.core.errors import AgentBranchError, ConfigurationError
    from agentbranch.deploy.schema import load_questions, schema_canvas
    from agentbranch.engine.capacity.shapes import DIFFUSIONGEMMA_26B, ModelShape
    from agentbranch.engine.capacity.sizing import size

    canvas_length, questions = sizing.canvas_length, sizing.questions
    if canvas_length is not None and questions is not None:
        raise typer.BadParameter("give --canvas-length or --questions, not both")
    shape = ModelShape.from_config(model_config) if model_config else DIFFUSIONGEMMA_26B
    # A value given is used or refused, never swapped for the default (`or` would turn
    # --canvas-length 0 into 64); size() and schema_canvas() say what is wrong with it.
    max_canvas = sizing.max_canvas
    if max_canvas is not None and max_canvas < 1:
        raise ConfigurationError(f"--max-canvas must be at least 1 token, got {max_canvas}")
    served = shape.max_canvas if max_canvas is None else min(max_canvas, shape.max_canvas)
    schema = None
    if questions is not None:
        schema = schema_canvas(
            load_questions(questions),
            joint=not sizing.single,
            max_canvas=served,
            encode=_encode(sizing.tokenizer),
        )
        canvas_length = schema.canvas_length
    try:
        plan = size(
            sizing.preset,
            gpu_gib=sizing.gpu_gib,
            canvas_length=64 if canvas_length is None else canvas_length,
            model_config=shape if model_config else None,
            gpu_memory_utilization=sizing.gpu_memory_utilization,
            prompt_tokens=sizing.prompt_tokens,
            max_model_len=8192 if sizing.max_model_len is None else sizing.max_model_len,
            weights_gib=sizing.weights_gib,
            activation_gib=sizing.activation_gib,
            reads_per_decision=schema.reads_per_decision if schema else 1,
        )
    except AgentBranchError as e:  # "gpu_gib must be ..." -> "--gpu-gib must be ..."
        name = str(e).split(" ", 1)[0]
        if name not in {f.name for f in fields(_Sizing)}:
            raise
        raise ConfigurationError("--" + name.replace("_", "-") + str(e)[len(name) :]) from None
    return plan, schema


@_sized
def size_command(
    sizing: _Sizing,
    model_config: Annotated[
        Path | None, typer.Option(help="A DiffusionGemma config.json (or its folder) instead.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """How many concurrent sequences (max_num_seqs) one GPU holds for DiffusionGemma reads."""
    with exit_on_error():
        plan, schema = _plan(sizing, model_config)
    if as_json:
        out = plan.to_dict()
        if schema is not None:
            out["schema"] = {k: getattr(schema, k) for k in ("questions", "joint", "widths")}
        print(json.dumps(out, indent=2))
        return
    console = Console(file=sys.stdout, width=max(Console().width, 120))
    title = f"{plan.model} on {plan.gpu_gib:g} GiB, canvas {plan.canvas_length}"
    table = Table("term", "GiB", "", "what", title=title)
    for t in plan.terms:
        table.add_row(t.name, f"{t.gib:.3f}", "per seq" if t.per_sequence else "", t.explanation)
    console.print(table)
    bound = "the denoising step" if plan.bound_by == "step" else "the KV cache"
    console.print(
        f"max_num_seqs = {plan.max_num_seqs} ({bound} bounds it; step {plan.step_limit}, "
        f"KV cache {plan.kv_limit})",
        soft_wrap=True,
    )
    if schema is not None:
        kind = "joint" if schema.joint else "single"
        console.print(
            f"{schema.questions} questions, {kind}: {schema.reads_per_decision} read(s) per "
            f"decision (widths {list(schema.widths)}), "
            f"{plan.decisions_in_flight} decisions at once",
            soft_wrap=True,
        )
    # A note is one line (the terminal wraps it): rich would cut it mid-phrase at its width.
    for note in plan.notes:
        console.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)


@deploy_app.command("kserve")
@_sized
def kserve_command(
    sizing: _Sizing,
    name: Annotated[str | None, typer.Option(help="InferenceService name.")] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="A folder (an existing one, or a name ending in /): write the "
            "InferenceService and the ServingRuntime it runs on there. Else a file for the "
            "InferenceService alone. Default: print it.",
        ),
    ] = None,
) -> None:
    """An InferenceService (KServe / OpenShift AI) whose vLLM arguments come from the plan,
    and the ServingRuntime it runs on (with -o DIR/)."""
    from agentbranch.deploy.kserve import inferenceservice_file, kserve_manifest
    from agentbranch.engine.presets import get_preset

    with exit_on_error():
        plan, _ = _plan(sizing)
        preset, questions = sizing.preset, sizing.questions
        command = f"agentbranch deploy kserve --preset {preset} --gpu-gib {sizing.gpu_gib:g}"
        if questions is not None:
            command += f" --questions {questions.name}"
        elif sizing.canvas_length is not None:
            command += f" --canvas-length {sizing.canvas_length}"
        folder = filename = None
        if output is not None and (output.endswith(("/", os.sep)) or Path(output).is_dir()):
            folder = Path(output)  # an existing directory, or a name ending in a slash
        elif output is not None:
            filename = Path(output).name
        text = kserve_manifest(preset, plan, name=name, command=command, filename=filename)
        if folder is not None:
            isvc_name = name if name is not None else get_preset(preset).name
            written = write_manifests(folder, text, inferenceservice_file(isvc_name))
        elif output is not None:
            written = [f"wrote {_write(Path(output), text)} (InferenceService)"]
    if output is None:
        sys.stdout.write(text)
        return
    for line in written:
        err.print(line, highlight=False, soft_wrap=True, markup=False)
    err.print(
        f"max_num_seqs {plan.max_num_seqs}, canvas {plan.canvas_length}"
        + ("" if folder is not None else "; the ServingRuntime it names: -o DIR/ writes it too"),
        highlight=False,
        soft_wrap=True,
    )


def _write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    from agentbranch.core.errors import InvalidFileError
    from agentbranch.core.files import check_writable

    check_writable(path, "output")
    target = path.resolve() if path.is_symlink() else path  # write through a symlink
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, "utf-8")
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InvalidFileError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def write_manifests(folder: Path, manifest: str, filename: str) -> list[str]:
    """Into ``folder`` (made if missing): the InferenceService as ``filename`` and the
    ServingRuntime it names. A runtime file already there that differs is kept (it may
    hold local edits) and said so; a line saying what happened to each file."""
    from agentbranch.core.errors import InvalidFileError
    from agentbranch.deploy.kserve import RUNTIME_FILE, servingruntime_manifest

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InvalidFileError(f"cannot create folder {folder}: {e.strerror or e}") from None
    written = [f"wrote {_write(folder / filename, manifest)} (InferenceService)"]
    runtime, text = folder / RUNTIME_FILE, servingruntime_manifest()
    try:
        current = runtime.read_text("utf-8") if runtime.is_file() else None
    except (OSError, UnicodeDecodeError):
        current = ""
    if current is None or current == text:
        written.append(f"wrote {_write(runtime, text)} (ServingRuntime)")
    else:
        written.append(
            f"kept {runtime} (a ServingRuntime that differs from this release's, perhaps "
            "edited: delete it to write the current one)"
        )
    return written
