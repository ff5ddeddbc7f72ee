"""Text embeddings on llama.cpp: `LlamaEmbedder`, llama-cpp-python's embedding mode with mean pooling.

Loads the GGUF (an embedding model such as nomic-embed-text, or the embedded chat model, whose mean-pooled
hidden states are a weaker stand-in) on the first `embed` call, CPU only, with a small context: a goal or an
episode is cut to `n_ctx` tokens. Returns plain lists of floats, normalised; `name` identifies the vectors
(file name), so a store can tell vectors of another model apart. `floor` is the z-score (standard deviations
above the mean similarity) at which an item is recalled on meaning alone (see longterm/store.py). Does not
store or rank anything (longterm/ does) and does not pick the model (runtime does).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_local.engines.inprocess.load import extra_buffers
from hermes_local.engines.inprocess.sampling import quiet_stderr
from hermes_local.errors import ModelLoadError


class LlamaEmbedder:
    """One embedding model, loaded lazily; `embed(texts, query=...)` -> one normalised vector per text."""

    def __init__(
        self,
        path: str | Path,
        *,
        floor: float,
        shared_word_floor: float = 1.0,
        query_prefix: str = "",
        document_prefix: str = "",
        n_ctx: int = 512,
        n_threads: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self.floor, self.shared_word_floor = floor, shared_word_floor
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self.n_ctx, self.n_threads = n_ctx, n_threads
        self._llama: Any = None
        self._lock = threading.Lock()

    def _model(self) -> Any:
        if self._llama is None:
            import llama_cpp

            kwargs: dict[str, Any] = dict(
                model_path=str(self.path),
                embedding=True,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                n_ctx=self.n_ctx,
                n_batch=self.n_ctx,
                n_ubatch=self.n_ctx,
                n_gpu_layers=0,
                verbose=False,
            )
            if self.n_threads:
                kwargs |= {"n_threads": self.n_threads, "n_threads_batch": self.n_threads}
            try:
                with quiet_stderr(), extra_buffers(llama_cpp, None):
                    self._llama = llama_cpp.Llama(**kwargs)
            except (ValueError, RuntimeError, OSError) as exc:
                raise ModelLoadError(f"llama.cpp could not load the embedding model {self.path}: {exc}") from exc
        return self._llama

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        """One vector per text (a query gets the model's query prefix, a stored item its document prefix)."""
        prefix = self.query_prefix if query else self.document_prefix
        with self._lock:
            llama = self._model()
            if not texts:
                return []
            with quiet_stderr():  # several texts share a decode (embedding mode sets up one sequence each)
                vectors = llama.embed([prefix + (t.strip() or ".") for t in texts], normalize=True, truncate=True)
            return [[float(v) for v in vector] for vector in vectors]

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
