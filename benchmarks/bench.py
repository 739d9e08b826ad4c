"""The read paths timed side by side: a concurrency sweep, graph.batch, the calling
patterns against their bound and the cold start, every ratio printed (docs/benchmarks.md).
The harness is the ``agentbranch_bench`` package beside this script (not in the wheel).

    OMP_NUM_THREADS=1 python benchmarks/bench.py                 # table on stdout
    OMP_NUM_THREADS=1 python benchmarks/bench.py --quick --json  # fewer repetitions, JSON
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))

from agentbranch.cli.common import fail, quiet_logs  # noqa: E402


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
    from agentbranch_bench.run import command

    from agentbranch.core.errors import AgentBranchError
    from agentbranch.core.files import check_writable

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


app = typer.Typer(add_completion=False)
app.command()(bench)

if __name__ == "__main__":
    app()
