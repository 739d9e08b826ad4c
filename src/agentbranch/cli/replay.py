"""``agentbranch replay diff OLD NEW``: drift between two recordings of a run (flipped
decisions, confidence and entropy changes, changed chat replies, new and removed
requests). Exit status 1 when anything flipped or the run asked other requests (gate a
model upgrade in CI), 2 when a cassette cannot be read, else 0."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agentbranch.cli.common import console, exit_on_error

__all__ = ["replay_app"]

replay_app = typer.Typer(
    name="replay", help="Decision cassettes: drift between recordings.", no_args_is_help=True
)


@replay_app.command("diff")
def diff(
    old: Annotated[Path, typer.Argument(help="the cassette recorded before (baseline)")],
    new: Annotated[Path, typer.Argument(help="the cassette recorded after (candidate)")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="list every decision, not only the changed ones")
    ] = False,
    min_change: Annotated[
        float, typer.Option(help="list decisions whose confidence moved at least this much")
    ] = 0.05,
) -> None:
    """Which decisions flipped between two cassettes of the same run."""
    from agentbranch.replay.diff import diff_cassettes

    with exit_on_error():
        report = diff_cassettes(old, new)
    say = partial(console.print, soft_wrap=True)  # one line a sentence, wrapped by the terminal
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
        raise typer.Exit(1 if report.changed else 0)

    if not (report.decisions or report.chats or report.added or report.removed):
        say("Neither cassette holds a read or a chat exchange: nothing to compare.")
        raise typer.Exit(0)

    if report.old_models or report.new_models:
        models = Table("id", "old", "new", title="models")
        for mid in sorted(set(report.old_models) | set(report.new_models)):
            models.add_row(mid, report.old_models.get(mid, "—"), report.new_models.get(mid, "—"))
        console.print(models)

    shown = [
        d
        for d in report.decisions
        if show_all or d.flipped or abs(d.new_confidence - d.old_confidence) >= min_change
    ]
    if not report.decisions:
        say("No read is in both cassettes: no decision to compare.")
    elif not shown:
        say(
            f"No decision flipped or moved by {min_change:g} or more "
            f"({len(report.decisions)} compared; --all lists them)."
        )
    else:
        title = f"decisions ({len(shown)} of {len(report.decisions)} shown)"
        columns = ("", "reader", "state", "question", "old → new", "confidence", "entropy")
        table = Table(*columns, "request", title=title)
        for d in shown:
            change = d.new_confidence - d.old_confidence
            table.add_row(
                "[red]FLIP[/red]" if d.flipped else "",
                d.reader,
                d.state[:40],
                d.question,
                f"{d.old_label} → {d.new_label}",
                f"{d.old_confidence:.3f} → {d.new_confidence:.3f} ({change:+.3f})",
                f"{d.old_entropy:.3f} → {d.new_entropy:.3f}",
                ", ".join(d.changed_fields) or "same",
            )
        console.print(table)
    chats_shown = [c for c in report.chats if show_all or c.flipped]
    if chats_shown:
        chats = Table("", "model", "last message", "old reply", "new reply", title="chat exchanges")
        for c in chats_shown:
            model = c.new_model if c.old_model == c.new_model else f"{c.old_model} → {c.new_model}"
            flag = "[red]CHANGED[/red]" if c.flipped else ""
            chats.add_row(flag, model, c.prompt, c.old_reply[:60], c.new_reply[:60])
        console.print(chats)
    elif report.chats:
        say(f"No chat reply changed ({len(report.chats)} compared; --all lists them).")
    for title, items in (("new requests", report.added), ("removed requests", report.removed)):
        if items:
            console.print(f"[bold]{title}[/bold] ({len(items)}):")
            for item in items:
                console.print(f"  {item}", markup=False)
    summary = report.to_json()["summary"]
    say(
        f"{summary['decisions']} decisions compared, {summary['flipped_decisions']} flipped; "
        f"{summary['chat_exchanges']} chat exchanges, {summary['changed_replies']} changed; "
        f"{summary['added']} new, {summary['removed']} removed requests"
    )
    raise typer.Exit(1 if report.changed else 0)
