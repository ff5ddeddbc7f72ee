"""The one door to every engine behind the `LLM` protocol: `load_engine(settings, model)`.

`settings.model = "replay:FILE"` -> the replay model (`replay.py`); `settings.engine`:
"llama-cpp" (the default) -> in-process llama.cpp (`engines/inprocess/`, imported only then: only that
folder imports llama_cpp), loaded once per process for a file and its load options, as sequences of one
batched context when `settings.parallel` > 1; "llama-server" or "vllm" -> the HTTP engine for
`settings.engine_url` after the offline check (loopback, or a host in `allow_hosts`), with the optional
bearer token and timeout, checking that the server serves one of the model's names.

Engines never look a model up: `runtime` resolves it (registry, file, GGUF header) once and hands the
result in as an `EngineModel`. `binaries.py` finds and starts llama.cpp's own programs (llama-server,
rpc-server). `load_embedder(path, ...)` is the embedding model of long-term memory (in-process llama.cpp,
loaded on its first use, one per file and process).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_local.config import Settings, settings_for
from hermes_local.engines.http import check_engine_url
from hermes_local.engines.replay import is_replay_spec, load_replay
from hermes_local.errors import EngineError, ModelLoadError, UserError
from hermes_local.llm import LLM

if TYPE_CHECKING:
    from hermes_local.models.gguf import GGUFHeader

ENGINES = ("llama-cpp", "llama-server", "vllm")

__all__ = ["ENGINES", "EngineModel", "load_embedder", "load_engine"]

_loaded: dict[tuple[Any, ...], LLM] = {}  # in-process models: llama.cpp weights are expensive to load twice
_embedders: dict[tuple[Any, ...], Any] = {}


@dataclass(frozen=True)
class EngineModel:
    """The model as `runtime` resolved it, for the engine to load."""

    path: Path | None = None  # the GGUF file (the in-process engine)
    header: GGUFHeader | None = None  # its parsed header: the memory estimate printed before loading
    names: tuple[str, ...] = ()  # what a server may report serving: the spec, its registry name, its file name
    load: Mapping[str, Any] = field(default_factory=dict)  # load options: its registry entry's, "auto" fitted
    note: str = ""  # how "auto" load options were chosen (models/fit.py), printed with the memory estimate
    draft: Path | None = None  # the draft model's GGUF (`--draft-model`), same vocabulary


def load_engine(
    settings: Settings,
    model: EngineModel | None = None,
    *,
    vocab_only: bool = False,
    on_info: Callable[[str], None] | None = None,
    case_id: str | None = None,
) -> LLM:
    """The engine of `settings` for `model` (default: `settings.model` as given, nothing resolved).

    `vocab_only`: for the in-process engine the tokenizer alone (no weights, not kept); the replay model
    and remote engines tokenize as they are. `on_info` receives the memory estimate before weights load.
    `case_id` picks the recording of `replay:DIR` (`DIR/<case_id>.jsonl`, one per eval case).
    Raises EngineError (one line) when a remote engine cannot be used.
    """
    model = model or EngineModel(names=(settings.model,) if settings.model else ())
    if is_replay_spec(settings.model):
        n_ctx = settings.n_ctx if isinstance(settings.n_ctx, int) else 32768
        return load_replay(settings.model or "", n_ctx=n_ctx, case_id=case_id)
    if settings.engine == "llama-cpp":
        return _in_process(settings, model, vocab_only=vocab_only, on_info=on_info)
    url = check_engine_url(settings.engine_url, settings.allow_hosts)
    common = dict(token=settings.engine_token, timeout=settings.engine_timeout, expected_model=list(model.names))
    if settings.engine == "llama-server":
        from hermes_local.engines.llama_server import LlamaServerLLM

        return LlamaServerLLM(url, seed=settings.seed, **common)  # type: ignore[arg-type]
    if settings.engine == "vllm":
        from hermes_local.engines.vllm import VLLMEngine

        assumed = settings.n_ctx if isinstance(settings.n_ctx, int) else None  # auto: the server's max_model_len
        return VLLMEngine(url, seed=settings.seed, n_ctx=assumed, **common)  # type: ignore[arg-type]
    raise EngineError(f"unknown engine {settings.engine!r}; choose one of: {', '.join(ENGINES)}")


def _in_process(
    settings: Settings, model: EngineModel, *, vocab_only: bool, on_info: Callable[[str], None] | None
) -> LLM:
    """llama.cpp in this process: the settings' load options (the registry's where the user set none)."""
    from hermes_local.engines.inprocess.llamacpp import LlamaCppLLM, LlamaParams
    from hermes_local.engines.threads import ThreadChooser, describe_threads

    if model.path is None:
        raise ValueError("the in-process engine loads a resolved GGUF: pass EngineModel(path=...)")
    path = model.path

    def open_model(params: LlamaParams, threads: ThreadChooser | None = None) -> LlamaCppLLM:
        try:
            return LlamaCppLLM(path, params, threads=threads)
        except ModelLoadError as exc:
            raise UserError(f"{exc}; check the file or re-download it") from exc

    if vocab_only:
        return open_model(LlamaParams(vocab_only=True))
    params = settings_for(LlamaParams, settings, **model.load)
    if not isinstance(params.n_ctx, int) or not isinstance(params.n_gpu_layers, int):
        raise ValueError("n_ctx / n_gpu_layers 'auto' are fitted by runtime.model before the engine loads")
    key = (str(path.resolve()), repr(sorted(vars(params).items())), str(model.draft))
    if key not in _loaded:
        chooser = None if params.n_threads else ThreadChooser()  # auto threads: the cores others leave free
        if on_info and model.header is not None:
            from hermes_local.engines.inprocess.backend import gpu_offload_available
            from hermes_local.models.footprint import memory_line

            gpu = gpu_offload_available()
            line = memory_line(model.header, params.n_ctx, params.n_gpu_layers, gpu_offload=gpu)
            by = "models qualify" if "n_threads" in model.load else "n_threads"  # load: registry or qualify's
            threads = describe_threads(params.n_threads, chooser, by=by)
            on_info(f"{model.note + '; ' if model.note else ''}{line}; {threads}")
        from hermes_local.engines.inprocess.preflight import preflight

        preflight(path, params)  # a build new to this machine loads once in a child: a native crash becomes one line
        _loaded[key] = open_model(params, chooser)
        if model.draft is not None:
            from dataclasses import replace

            from hermes_local.engines.inprocess.draftmodel import attach_draft

            preflight(model.draft, replace(params))  # the draft model loads on the same device: checked the same way
            attach_draft(_loaded[key], model.draft)
    if settings.parallel > 1:  # concurrent runs share the model as sequences of one batched context
        from hermes_local.engines.inprocess.batching import BatchedLLM

        batched_key = (*key, "parallel", settings.parallel)
        if batched_key not in _loaded:
            _loaded[batched_key] = BatchedLLM(_loaded[key], settings.parallel)  # type: ignore[arg-type]
        return _loaded[batched_key]
    return _loaded[key]


def load_embedder(path: Path, *, floor: float, **options: Any) -> Any:
    """The `LlamaEmbedder` for this GGUF (shared by the runs of a process; the weights load on the first embed);
    `options`: its shared_word_floor and query/document prefixes."""
    key = (str(path), floor, *sorted(options.items()))
    if key not in _embedders:
        from hermes_local.engines.inprocess.embedding import LlamaEmbedder

        _embedders[key] = LlamaEmbedder(path, floor=floor, **options)
    return _embedders[key]
