"""``agentbranch bench``: the read paths timed side by side (the harness is the separate
``agentbranch_bench`` package, imported only when the command runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentbranch.cli.common import fail, quiet_logs

__all__ = ["bench"]


def bench(
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    plot: Annotated[Path | None, typer.Option(help="Write the plot (PNG) here.")] = None,
    quick: Annotated[bool, typer.Option(help="Fewer repetitions.")] = False,
    vllm: Annotated[
        bool | None, typer.Option(help="Run the vLLM part (default: when vllm imports).")
    ] = None,
    vllm_model: Annotated[
        Path | None, typer.Option(help="A causal model folder for the vLLM part.")
    ] = None,
    cpu: Annotated[bool, typer.Option(help="Run the CPU (transformers) part.")] = True,
    patterns: Annotated[
        bool,
        typer.Option(help="Time the calling patterns against their bound on each reader run."),
    ] = True,
    cold_start: Annotated[
        bool, typer.Option(help="Time fresh interpreters to the first decision, by phase.")
    ] = True,
) -> None:
    """Time the read paths side by side and print every ratio (see docs/benchmarks.md)."""
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.core.files import check_writable
    from agentbranch_bench.run import command

    quiet_logs(False)
    try:  # before minutes of measuring, not after
        if plot is not None:
            check_writable(plot, "--plot")
        if vllm_model is not None and not vllm_model.is_dir():
            raise fail(f"--vllm-model {vllm_model} is not a folder (a causal model's files)")
    except AgentBranchError as e:
        raise fail(e) from None
    parts = dict(quick=quick, vllm=vllm, vllm_model=vllm_model, cpu=cpu, patterns=patterns)
    raise typer.Exit(command(json_out, plot, cold_start=cold_start, **parts))
