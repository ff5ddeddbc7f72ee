"""Issue 29, the newcomer's path: names that resolve or suggest, exit codes a script can rely on, the
`hermes-local "task"` shortcut, stdin and follow-up runs, help texts that keep their brackets."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.errors import UserError
from hermes_local.models.registry import close_names, lookup, resolve_model

runner = CliRunner()


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("hermes-2-pro-llama3-8b", "hermes-2-pro-llama-3-8b:Q4_K_M"),
        ("hermes-2-pro-llama-3-8:Q5_K_M", "hermes-2-pro-llama-3-8b:Q5_K_M"),
        ("hermes-3-lama-3.1-8b", "hermes-3-llama-3.1-8b:Q4_K_M"),
    ],
)
def test_an_unknown_model_name_suggests_the_closest_registry_name(typed: str, suggested: str) -> None:
    assert close_names(typed)[0] == suggested
    with pytest.raises(UserError, match=f"did you mean {suggested}"):
        resolve_model(typed)


def test_the_name_a_user_types_for_hermes_2_pro_llama_3_resolves() -> None:
    choice = lookup("hermes-2-pro-llama-3:Q5_K_M")
    assert choice is not None and choice.label == "hermes-2-pro-llama-3-8b:Q5_K_M"


def test_run_with_a_misspelt_model_says_did_you_mean_in_one_line(workspace: Path) -> None:
    res = runner.invoke(app, ["run", "x", "--model", "hermes-2-pro-lama-3-8b", "--workspace", str(workspace)])
    assert res.exit_code == 2 and "did you mean hermes-2-pro-llama-3-8b:Q4_K_M?" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
