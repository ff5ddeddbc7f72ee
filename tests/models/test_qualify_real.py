"""`models qualify` on the embedded SmolLM2 (issue 46): the real path, end to end — memory fit, speed (also per
thread count), the probes in auto and required mode, the record in qualified.toml, `models list` showing it, runs
using its defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hermes_local.cli.app import app
from hermes_local.config import load_settings
from hermes_local.engines.threads import usable_cores
from hermes_local.models.qualified import qualification, qualified_file, thread_candidates
from hermes_local.runtime.model import qualified_settings

pytestmark = pytest.mark.real_model


def test_qualify_the_embedded_model_and_runs_use_its_defaults(embedded_model_path: Path) -> None:
    result = CliRunner().invoke(app, ["models", "qualify", "smollm2", "--repeat", "1", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout[result.stdout.index("{") :])
    assert record["file"] == str(qualified_file()) and qualified_file().is_file()
    assert set(record["passes"]) == {"auto", "required"} and all(0 <= v <= 1 for v in record["passes"].values())
    assert set(record["probes_auto"]) == {
        "single_call", "parallel_calls", "nested_arguments", "no_tool_question", "long_tool_result",
        "injected_instruction",
    }  # fmt: skip
    assert record["speed"]["decode_tps"] > 0 and record["speed"]["prompt_tps"] > 0
    counts = thread_candidates(len(usable_cores()))  # each measured on the one loaded model
    assert set(record["threads"]) == ({str(n) for n in counts} if len(counts) > 1 else set())
    assert all(tps > 0 for tps in record["threads"].values()) and record["speed"]["busy_others"] >= 0
    defaults = record["defaults"]
    assert defaults["tool_choice"] in ("auto", "required") and defaults["n_gpu_layers"] in (0, -1)
    assert defaults["n_threads"] == "auto" or defaults["n_threads"] in counts[:-1]
    saved = qualification(embedded_model_path)
    assert saved is not None and saved["defaults"] == defaults and saved["threads"] == record["threads"]
    used = {k: v for k, v in defaults.items() if (k, v) != ("n_threads", "auto")}  # auto: left unset
    assert qualified_settings(load_settings({}), embedded_model_path) == used
    listing = CliRunner().invoke(app, ["models", "list"])
    assert "qualified " in listing.stdout and f"tool_choice={defaults['tool_choice']}" in listing.stdout
    assert f"n_threads={defaults['n_threads']}" in listing.stdout
    assert ("    threads: " in listing.stdout) == bool(record["threads"])  # the figures behind the choice
