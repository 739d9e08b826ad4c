"""``agentbranch verify LABELLED``: a CI verdict on a frozen threshold's take band, PASS
(exit 0), BLOCK (1) or INCONCLUSIVE (2) (``agentbranch.audit.verdict`` says the rule); any
error exits 3, a mistyped flag included, so a CI step never reads an error as a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from agentbranch.cli.common import (
    FlagCommand,
    LabelledQuestions,
    LineQuestion,
    Verbose,
    console,
    fail,
    load_engine,
    quiet_logs,
    read_questions,
)

__all__ = ["ERROR", "VerifyCommand", "verify"]

ERROR = 3


# click's UsageError, wherever this typer has it (typer 0.29 ships its own copy of click).
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class VerifyCommand(FlagCommand):
    """Usage errors (a missing argument, an unknown flag, a value of the wrong type)
    exit 3, not click's 2, which is INCONCLUSIVE here."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _USAGE_ERROR as e:
            e.exit_code = ERROR
            raise


def _engine(cassette: Path | None, record: str | None, calibration: Path | None, perms: int):
    """The engine the environment selects; with ``--cassette``, one reading through it
    (the environment's reader is built only to record a miss)."""
    if cassette is None:
        return load_engine(calibration, perms, code=ERROR)[0]
    from agentbranch.engine.engine import DecisionEngine
    from agentbranch.engine.selection import EngineSettings
    from agentbranch.replay import Cassette

    box = Cassette(cassette, record)
    if box.mode == "none" and not box.path.exists():
        raise fail(f"no cassette at {cassette} (mode 'none' replays only): record it first", ERROR)
    # The calibration the environment names, as DecisionEngine.from_env would load it.
    named = str(calibration) if calibration else EngineSettings.from_env().calibration
    return DecisionEngine(
        box.reader(lambda: load_engine(None, perms, code=ERROR)[0].reader),
        permutations=perms,
        calibration=named,
    )


def verify(
    labelled: Annotated[
        Path, typer.Argument(help="Labelled JSON Lines (the format of agentbranch calibrate).")
    ],
    precision: Annotated[
        float, typer.Option(help="Target precision of the take band (1 - its risk), in [0, 1].")
    ],
    coverage: Annotated[
        float, typer.Option(help="Target coverage: share of decisions taken, in [0, 1].")
    ],
    take_at: Annotated[
        float | None, typer.Option(help="The frozen threshold for every question.")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="An Earned policy's evidence store (JSON Lines, SQLite file or "
            "postgresql:// URI): the thresholds it holds now, per question."
        ),
    ] = None,
    level: Annotated[
        float, typer.Option(help="Confidence level, split over the two bounds (Bonferroni).")
    ] = 0.95,
    cassette: Annotated[
        Path | None,
        typer.Option(help="Read through this replay cassette (offline in CI; docs/replay.md)."),
    ] = None,
    record: Annotated[
        str | None,
        typer.Option(help="Cassette record mode: none, new or all (default: none if CI is set)."),
    ] = None,
    questions: LabelledQuestions = None,
    question: LineQuestion = None,
    calibration: Annotated[Path | None, typer.Option(help="A calibration file to apply.")] = None,
    permutations: Annotated[int, typer.Option(help="Option orders the engine averages.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    verbose: Verbose = False,
) -> None:
    """A CI verdict: does a frozen threshold's take band reach --precision and --coverage
    on LABELLED? Exit 0 PASS (both lower bounds reach their targets), 1 BLOCK (an upper
    bound falls short), 2 INCONCLUSIVE (too few examples to tell), 3 error.

    Exact (Clopper-Pearson) bounds, each one-sided at 1 - (1 - level)/2, so a PASS and a
    BLOCK are each wrong with probability at most 1 - level (docs/replay.md)."""
    from agentbranch.audit.verdict import thresholds_in_force
    from agentbranch.audit.verdict import verify as run
    from agentbranch.core.errors import AgentBranchError

    quiet_logs(verbose)
    if (take_at is None) == (store is None):
        raise fail("give the frozen policy: --take-at X or --store PATH (one of them)", ERROR)
    if permutations < 1:
        raise fail(f"--permutations must be 1 or more, got {permutations}", ERROR)
    if record is not None and record not in ("none", "new", "all"):
        raise fail(f"--record must be none, new or all, got {record!r}", ERROR)
    if record is not None and cassette is None:
        raise fail("--record is the record mode of --cassette: give --cassette PATH", ERROR)
    try:
        from agentbranch.calibration.labelled import load_labelled

        extra = read_questions(questions) if questions else None
        examples = load_labelled(labelled, extra, default_question=question)
        asked = sorted({ex.question_id for ex in examples})
        if store is not None:  # a path, or a PostgreSQL URI as given
            take_at = thresholds_in_force(store if "://" in store else Path(store), asked)
        engine = _engine(cassette, record, calibration, permutations)
        result = run(
            engine,
            examples,
            take_at=take_at,
            precision=precision,
            coverage=coverage,
            level=level,
        )
    except (AgentBranchError, OSError) as e:
        raise fail(e, ERROR) from None
    except typer.Exit:
        raise
    except Exception as e:  # noqa: BLE001 - a crash must not exit 1, which reads as BLOCK
        raise fail(f"{type(e).__name__}: {e}", ERROR) from e
    if as_json:
        print(json.dumps(result.as_dict(), indent=2, allow_nan=False))
    else:
        colour = {"PASS": "green", "BLOCK": "red", "INCONCLUSIVE": "yellow"}[result.verdict]
        head, *rest = result.summary().splitlines()
        console.print(f"[bold {colour}]{head}[/]", highlight=False, soft_wrap=True)
        for line in rest:
            console.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(result.exit_code)
