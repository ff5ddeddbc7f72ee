"""The model of a run: `--model` found once, loaded once, and the prompt format it speaks.

`find_model` resolves `--model` once (registry entry, file, GGUF header) into a `ModelSource` that the tokenizer,
the dialect choice and the engine (`engines.load_engine`, which keeps one loaded model per process) all take; a
GGUF whose chat template does not compile is refused there in one line (model, key, template line) before
anything loads, unless `--dialect` names a format with its own template.
`Model` is what `start_run` is given: a loaded LLM with its dialect (`load_model`, the service's shared model, an
eval's), or one still to load (`Model.deferred`: the CLI checks tools, paths and framing tokens before the
weights are read). Does not print anything, build tools or run anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_local.config import Settings, load_settings
from hermes_local.dialects import DIALECT_NAMES, Dialect, detect_dialect_and_basis, require_framing, select_dialect
from hermes_local.dialects.gguf import GGUFDialect, template_error
from hermes_local.engines import EngineModel, load_engine
from hermes_local.engines.replay import is_replay_spec
from hermes_local.errors import UserError
from hermes_local.llm import LLM

if TYPE_CHECKING:
    from hermes_local.models.fit import Fit
    from hermes_local.models.gguf import GGUFHeader
    from hermes_local.models.registry import ModelChoice

ENTRY_LOAD_OPTIONS = ("n_ctx", "n_gpu_layers", "main_gpu", "tensor_split", "rpc_servers")
QUALIFIED_LOAD_OPTIONS = (*ENTRY_LOAD_OPTIONS, "n_threads")  # `models qualify` may also fix the thread count


@dataclass(frozen=True)
class ModelSource:
    """The model of a run, found once (`find_model`) and handed to the tokenizer, the dialect and the engine."""

    spec: str | None  # `--model` as given
    replay: bool = False  # `replay:FILE`: recorded outputs, no model file
    choice: ModelChoice | None = None  # the models.toml entry `spec` named
    path: Path | None = None  # the GGUF on disk (in-process engine)
    header: GGUFHeader | None = None  # its header, parsed and checked once

    def engine_model(self, settings: Settings) -> EngineModel:
        """What the engine loads: the file, the names a server may report for it, and the registry entry's
        `n_ctx`, `n_gpu_layers`, `main_gpu`, `tensor_split` and `rpc_servers` unless the user set them
        (flag, env or config file); `models qualify`'s recorded ones (also `n_threads`) beat the registry's."""
        names: list[str] = [self.spec] if self.spec else []
        load: dict[str, Any] = {}
        if self.choice is not None:
            names += [self.choice.name, self.choice.spec.file]
            for name in ENTRY_LOAD_OPTIONS:
                value = getattr(self.choice.entry, name)
                if name not in settings.model_fields_set and value is not None:
                    load[name] = value
        for name, value in qualified_settings(settings, self.path).items():  # `models qualify` beats the registry
            if name in QUALIFIED_LOAD_OPTIONS:
                load[name] = value
        note = ""
        if self.header is not None:  # "auto" values fitted to free memory; a combination that cannot fit: refused
            fitted, chosen = fit_settings(settings.model_copy(update=load), self.header)
            if chosen.auto:
                load.update({name: getattr(fitted, name) for name in chosen.auto})
                note = chosen.line()
        draft = find_draft(settings)
        return EngineModel(path=self.path, header=self.header, names=tuple(names), load=load, note=note, draft=draft)


def fit_settings(settings: Settings, header: GGUFHeader) -> tuple[Settings, Fit]:
    """`settings` with `n_ctx` / `n_gpu_layers` "auto" replaced by what fits the free device and host memory
    now (`models.fit`), and the `Fit` (its `n_ctx` and `n_gpu_layers` are numbers either way). Fixed values
    are kept; one that cannot fit the device is refused in one line (UserError) before anything loads."""
    from hermes_local.engines.inprocess.backend import device_free
    from hermes_local.models.fit import Free, fit, host_free

    device, host = device_free(settings.main_gpu), host_free()
    beside_device, beside_host = _companions(settings, gpu=device is not None)
    free = Free(None if device is None else device - beside_device, None if host is None else host - beside_host)
    chosen = fit(header, settings.n_ctx, settings.n_gpu_layers, free, n_batch=settings.n_batch,
                 sequences=settings.parallel)  # fmt: skip
    return settings.model_copy(update={name: getattr(chosen, name) for name in chosen.auto}), chosen


def _companions(settings: Settings, *, gpu: bool) -> tuple[int, int]:
    """Device and host bytes of the models a run loads beside this one, reserved before it is fitted: the
    `router_model` (n_ctx 2048, all layers on the device when there is one) and long-term memory's embedding
    model (on the CPU, its file's size). One that cannot be found reserves nothing (its own load says why)."""
    from hermes_local.models.embeddings import embedding_choice
    from hermes_local.models.footprint import estimate_memory
    from hermes_local.models.registry import resolve

    device = host = 0
    try:
        if settings.router_model and settings.router_model != settings.model:
            est = estimate_memory(resolve(settings.router_model)[2], 2048, -1 if gpu else 0)
            device, host = est["gpu_bytes"], est["cpu_bytes"]
        embedder = embedding_choice(settings.embedding_model) if settings.memory else None
        if embedder is not None and (settings.model is None or embedder.path != Path(settings.model)):
            host += embedder.path.stat().st_size  # its weights; at n_ctx 512 its KV cache and buffers are small
    except (UserError, OSError):
        pass
    return device, host


def find_draft(settings: Settings) -> Path | None:
    """The GGUF of `settings.draft_model` (a registry name or a file), or None; only the in-process engine drafts."""
    if not settings.draft_model or settings.engine != "llama-cpp" or is_replay_spec(settings.model):
        return None
    from hermes_local.models.registry import resolve

    return resolve(settings.draft_model)[0]


def qualified_settings(settings: Settings, model_path: str | Path | None) -> dict[str, Any]:
    """The defaults `models qualify` recorded for this GGUF, for the settings the user did not give (flag,
    environment or config file); {} for a file never qualified (or changed since)."""
    from hermes_local.models.qualified import qualified_defaults

    recorded = qualified_defaults(model_path) if model_path else {}
    return {k: v for k, v in recorded.items() if k not in settings.model_fields_set}


def find_model(settings: Settings) -> ModelSource:
    """`settings.model` resolved once: the replay marker; for a remote engine the registry entry it names
    (the server holds the file); otherwise the GGUF on disk, its registry entry and its checked header."""
    if is_replay_spec(settings.model) or settings.engine != "llama-cpp":
        return _named_model(settings)
    from hermes_local.models.registry import resolve

    path, choice, header = resolve(settings.model)
    problem = template_problem(header)
    if problem and settings.dialect in (None, "gguf"):
        formats = "|".join(n for n in DIALECT_NAMES if n != "gguf")
        raise UserError(
            f"model {path.name}: its chat template does not parse ({problem}); pass --dialect {formats} to use "
            "that format's own template instead"
        )
    return ModelSource(settings.model, choice=choice, path=path, header=header)


def template_problem(header: GGUFHeader | None) -> str:
    """Why one of the GGUF's chat templates (`tokenizer.chat_template`, its named variants) does not compile, as
    `KEY line N: message` ("" when all compile or there is none). Checked before the model loads."""
    for key, value in header.metadata.items() if header is not None else ():
        if (key == "tokenizer.chat_template" or key.startswith("tokenizer.chat_template.")) and isinstance(value, str):
            error = template_error(value)
            if error:
                return f"{key} {error}"
    return ""


def load_llm(
    settings: Settings, on_info: Callable[[str], None] | None = None, source: ModelSource | None = None, *,
    case_id: str | None = None) -> LLM:  # fmt: skip
    """The run's engine (`engines.load_engine`) for `source` (default: `find_model(settings)`).

    `replay:FILE` -> the replay model (`replay:DIR`: the recording of eval case `case_id`); a remote
    `settings.engine` -> its HTTP engine; otherwise the GGUF, loaded once per process. `on_info` receives
    the memory estimate before the weights are loaded.
    """
    source = source or find_model(settings)
    return load_engine(settings, source.engine_model(settings), on_info=on_info, case_id=case_id)


def load_tokenizer(settings: Settings, source: ModelSource | None = None) -> LLM:
    """The model's tokenizer only (llama.cpp vocab_only: no weights), the replay model, or the remote engine
    (the server tokenizes; connecting also checks it serves the right model)."""
    source = source or find_model(settings)
    return load_engine(settings, source.engine_model(settings), vocab_only=True)


def gguf_header(source: ModelSource, llm: LLM) -> Any | None:
    """The GGUF header the dialect is read from: the source's, else that of the file the engine says it serves
    (`model_path`), else None."""
    served = getattr(llm, "model_path", None)
    if source.header is None and served and Path(served).is_file():
        from hermes_local.models.gguf import read_header

        return read_header(served)
    return source.header


def dialect_for(settings: Settings, llm: LLM, source: ModelSource | None = None, *, check: bool = False) -> Dialect:
    """The prompt format: `--dialect`, else the registry's `chat_format`, else the GGUF's metadata; its call
    syntax from the registry's `tool_call_format` (see `calls/formats.py`).

    `source` is the run's `find_model` result; without it, the registry entry `settings.model` names.
    The GGUF header is the source's, else that of the file the engine says it serves (`model_path`).
    With `check`, a real model whose vocabulary lacks the dialect's framing tokens is refused (one line,
    exit 2, naming --dialect); the replay model has no real vocabulary and is never refused.
    """
    if source is None:
        source = _named_model(settings)
    if source.replay:
        return select_dialect(settings.dialect or "hermes")
    header = gguf_header(source, llm)
    choice = source.choice
    chat_format = choice.entry.chat_format if choice else None
    call_format = choice.entry.tool_call_format if choice else None
    dialect = select_dialect(
        settings.dialect, chat_format=chat_format, header=header, llm=llm, tool_call_format=call_format
    )
    if isinstance(dialect, GGUFDialect) and header is not None and hasattr(llm, "detokenize"):
        ids = [header.metadata.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot")]
        dialect.add_stops(llm.detokenize([i]) for i in ids if isinstance(i, int))  # the GGUF's EOS/EOT texts
    if check:
        require_framing(dialect, llm)
    return dialect


def _named_model(settings: Settings) -> ModelSource:
    """The registry entry `settings.model` names, looked up without finding its file (already loaded)."""
    if is_replay_spec(settings.model):
        return ModelSource(settings.model, replay=True)
    from hermes_local.models.registry import lookup

    return ModelSource(settings.model, choice=lookup(settings.model) if settings.model else None)


def check_tool_use(dialect: Dialect, settings: Settings) -> None:
    """Refuse (one line) `tool_choice = "required"` for a model whose tool_call_format is "none"."""
    if dialect.call_format == "none" and settings.tool_choice == "required":
        raise UserError(
            f'{settings.model} has tool_call_format = "none" in models.toml, so it cannot call tools; '
            "drop --tool-choice required, or set its tool_call_format in $HERMES_LOCAL_HOME/models.toml"
        )


@dataclass
class Model:
    """A run's model and its prompt format. `llm` None: not loaded yet (`deferred`); `load()` loads it once, after
    `start_run` has checked what can be checked without the weights. `dialect` None: chosen for the loaded model
    when the run is assembled."""

    llm: LLM | None = None
    dialect: Dialect | None = None
    on_info: Callable[[str], None] | None = None  # a deferred model: the memory estimate before the weights load

    @classmethod
    def deferred(cls, on_info: Callable[[str], None] | None = None) -> Model:
        """The model the run's settings name, loaded by `start_run` once the run's tools and paths are checked."""
        return cls(on_info=on_info)

    def prepare(self, settings: Settings, notice: Callable[[str], None] | None = None) -> None:
        """Load a deferred model: its dialect first, from the vocabulary alone (a model whose vocabulary lacks the
        framing tokens, or `--tool-choice required` for a model that cannot call tools, is refused in one line
        before the weights are read), then the weights. A loaded model is left as it is."""
        if self.llm is not None:
            return
        source = find_model(settings)  # resolved once: the tokenizer, the dialect and the weights take it
        problem = template_problem(source.header)  # only with --dialect: find_model refuses it otherwise
        if problem and notice is not None:
            notice(f"the model's chat template does not parse ({problem}); using the {settings.dialect} format's own")
        tokenizer = load_tokenizer(settings, source)
        dialect = dialect_for(settings, tokenizer, source)
        if (settings.dialect or "").lower() == "auto" and notice is not None:  # said before any refusal
            basis = (
                "the default"
                if source.replay
                else detect_dialect_and_basis(gguf_header(source, tokenizer), tokenizer)[1]
            )
            notice(f"--dialect auto picked {dialect.name} ({dialect.call_format} tool calls) from {basis}")
        if not source.replay:
            require_framing(dialect, tokenizer)
        check_tool_use(dialect, settings)
        if dialect.call_format == "none" and notice is not None:
            notice(f'{settings.model} has tool_call_format = "none" in models.toml: it runs without tools')
        self.llm = load_llm(settings, on_info=self.on_info, source=source)
        self.dialect = dialect

    @property
    def loaded(self) -> LLM:
        """The LLM (after `prepare`)."""
        if self.llm is None:
            raise RuntimeError("the model is not loaded yet; start_run loads it")
        return self.llm


def load_model(name: str | None = None, settings: Settings | Mapping[str, Any] | None = None) -> Model:
    """The library's way to get a model: `name` (a models.toml name, a GGUF path or `replay:FILE`; default: the
    configured model, else the embedded SmolLM2) loaded once, with its dialect checked; `settings` a `Settings` or
    overrides for `load_settings` (e.g. `{"n_gpu_layers": -1}`)."""
    chosen = settings if isinstance(settings, Settings) else load_settings(dict(settings or {}))
    if name is not None:
        chosen = chosen.model_copy(update={"model": name})
    model = Model.deferred()
    model.prepare(chosen)
    return model
