"""`hermes-local models qualify NAME|FILE`: what this model can do on this machine, and the run defaults it earns.

Fits `n_ctx` and `n_gpu_layers` to the memory free now (`models/fit.py`, as `--n-ctx auto` does; says what it
chose), measures prompt and decode tokens/s (`doctor`'s speed check) and, on the same loaded model, decode tok/s
at a few thread counts of the usable cores, runs the probe set in auto and required mode with pass^k
(`evals/qualify.py`) behind a progress bar on stderr, recommends defaults (`models/qualified.recommend`) and
writes them to `$HERMES_LOCAL_HOME/qualified.toml`; later runs of that file use them for any setting not given.
`--json` prints the whole record. Prints; holds no logic of its own.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from typing import Annotated, Any

import typer

from hermes_local.cli.common import JsonOpt, settings_from_flags
from hermes_local.cli.models import models_app


@models_app.command("qualify")
def models_qualify(
    model: Annotated[str, typer.Argument(help="Registry NAME[:QUANT] or a path to a .gguf file.")],
    repeat: Annotated[int, typer.Option(min=1, max=10, help="Runs per probe and mode (pass^k).")] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Qualify a model on this machine: memory fit, speed, tool-calling probes (auto and required, pass^k);
    writes the recommended defaults (tool_choice, tools before routing, n_ctx, n_gpu_layers, threads) for its runs."""
    from hermes_local.cli.gpu import measure
    from hermes_local.engines.threads import usable_cores
    from hermes_local.evals.qualify import MODES, PROBES, run_probes
    from hermes_local.models.qualified import (
        fitness,
        recommend,
        save_qualification,
        thread_candidates,
        threads_line,
    )
    from hermes_local.models.registry import resolve
    from hermes_local.runtime.model import fit_settings

    start = time.perf_counter()
    path, choice, header = resolve(model)
    settings, chosen = fit_settings(
        settings_from_flags({"model": str(path), "n_ctx": "auto", "n_gpu_layers": "auto"}), header
    )
    typer.echo(chosen.line(), err=True)  # the same fit as `run --n-ctx auto --n-gpu-layers auto` (models/fit.py)
    fit = {"n_ctx": chosen.n_ctx, "n_gpu_layers": chosen.n_gpu_layers}
    counts = thread_candidates(len(usable_cores()))  # `doctor`'s speed check, then again at each count
    counts = counts if len(counts) > 1 else []  # one core: nothing to choose
    measured = measure(path, settings, chosen.n_gpu_layers, chosen.n_ctx, drafting=False, threads=counts)
    speed = {k: float(measured.get(k, 0.0)) for k in ("prompt_tps", "decode_tps", "load_s", "busy_others")}
    threads = {str(n): round(float(tps["decode_tps"]), 2) for n, tps in measured.get("threads", {}).items()}
    typer.echo(f"speed: prompt {speed['prompt_tps']:.0f} tok/s, decode {speed['decode_tps']:.1f} tok/s", err=True)
    total = len(PROBES) * len(MODES) * repeat
    with typer.progressbar(length=total, label="probes", file=sys.stderr) as bar:
        results = run_probes(settings, repeat, on_run=lambda line: bar.update(1))
    defaults = recommend(results["passes"], fit, threads, speed["busy_others"])
    record: dict[str, Any] = {
        "model": choice.label if choice else path.name,
        "qualified_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - start, 1),
        "repeat": repeat,
        "defaults": defaults,
        "verdict": fitness(results["passes"]),
        "passes": results["passes"],
        "speed": {k: round(v, 2) for k, v in speed.items()},
        "threads": threads,
        **{f"probes_{mode}": verdicts for mode, verdicts in results["probes"].items()},
    }
    written = save_qualification(path, record)
    if as_json:
        typer.echo(json.dumps(record | {"file": str(written)}, indent=2))
        return
    for mode in MODES:
        shown = ", ".join(f"{k} {v}" for k, v in results["probes"][mode].items())
        typer.echo(f"{mode:9} pass^{repeat} {results['passes'][mode]:.0%}: {shown}")
    typer.echo(f"verdict: {record['verdict']}")
    typer.echo("defaults: " + ", ".join(f"{k}={v}" for k, v in defaults.items()))
    if threads:
        typer.echo(threads_line(record))
    typer.echo(f"written to {written} in {record['seconds']}s; runs of this file use these unless told otherwise")
