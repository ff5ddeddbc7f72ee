"""`hermes-local skills list | show NAME | check DIR | trust NAME`: the skills a run in this folder would offer.

Thin: `tools/skills.py` finds the user's skills (`$HERMES_LOCAL_HOME/skills/`) and the project's (`.hermes/skills/`
of `--workspace`, default the current folder), checks a folder's front matter (one line per problem, exit 2 when
there is one) and pins a project skill the user accepts (`trust`). `app.py` mounts `skills_app`. Does not run a
model or change any skill.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from hermes_local.cli.common import JsonOpt
from hermes_local.textsafe import terminal_safe

skills_app = typer.Typer(help="Skills: SKILL.md folders the agent opens when a task needs them.", no_args_is_help=True)
WorkspaceOpt = Annotated[Path, typer.Option("--workspace", "-w", help="The project whose .hermes/skills to include.")]


@skills_app.command("list")
def skills_list(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Every skill a run in the workspace is offered: name, whose (user / project), trusted, one line."""
    from hermes_local.tools.skills import discover

    skills, notes = discover(workspace)
    if as_json:
        rows = [
            {"name": s.name, "origin": s.origin, "trusted": s.trusted, "description": s.description,
             "folder": str(s.folder)}
            for s in skills
        ]  # fmt: skip
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    for s in skills:
        trust = "trusted" if s.trusted else "UNTRUSTED (skills trust NAME)"
        typer.echo(terminal_safe(f"{s.name}  [{s.origin}, {trust}]  {' '.join(s.description.split())}"))
    for note in notes:
        typer.echo(terminal_safe(f"({note})"), err=True)
    if not skills:
        typer.echo("(no skills: add folders with a SKILL.md under $HERMES_LOCAL_HOME/skills or .hermes/skills)")


@skills_app.command("show")
def skills_show(name: str, workspace: WorkspaceOpt = Path(".")) -> None:
    """A skill's front matter, where it lives, its instructions and its other files."""
    from hermes_local.tools.skills import SKILL_FILE, find, skill_files, split_front_matter

    skill = find(name, workspace)
    _, body, _ = split_front_matter((skill.folder / SKILL_FILE).read_text(encoding="utf-8"))
    trust = "trusted" if skill.trusted else "untrusted: its text is data to the agent until `skills trust`"
    typer.echo(terminal_safe(f"{skill.name} ({skill.origin}, {trust})"))
    typer.echo(terminal_safe(f"folder: {skill.folder}"))
    typer.echo(terminal_safe(f"description: {skill.description}"))
    for key, value in skill.extra.items():
        typer.echo(terminal_safe(f"{key}: {value}"))
    typer.echo("")
    typer.echo(terminal_safe(body, keep_newlines=True))
    files = skill_files(skill.folder)
    if files:
        typer.echo("\nfiles: " + terminal_safe(", ".join(files)))


@skills_app.command("check")
def skills_check(folder: Path) -> None:
    """Check a skill folder's SKILL.md: each front-matter problem on one line (exit 2 when there is one)."""
    from hermes_local.tools.skills import check_folder

    problems = check_folder(folder)
    if problems:
        for line in problems:
            typer.echo(terminal_safe(f"{folder.name}: {line}"), err=True)
        raise typer.Exit(2)
    typer.echo(terminal_safe(f"{folder.name}: ok"))


@skills_app.command("trust")
def skills_trust(name: str, workspace: WorkspaceOpt = Path(".")) -> None:
    """Accept a project skill as it is now (its SKILL.md pinned by hash; a later change is untrusted again)."""
    from hermes_local.tools.skills import trust

    skill = trust(name, workspace)
    typer.echo(terminal_safe(f"trusted {skill.name} ({skill.folder}, sha256 {skill.digest[:12]})"))
