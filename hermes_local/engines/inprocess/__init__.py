"""The in-process llama.cpp engine: the only code of hermes-local that imports `llama_cpp`.

`llamacpp.py` is `LlamaCppLLM` and `LlamaParams`, `load.py` load-time options (batch-invariant kernels,
extra buffers), `sampling.py` the sampler and output assembly, `decoding.py` the grammar tracker and
fast-forward drafts, `automaton.py` the GBNF automaton, `drafting.py` prompt lookup, `kvcache.py` the
persistent prefix cache, `batching.py` concurrent runs as sequences of one context, `embedding.py` text
embeddings for long-term memory, `backend.py` the build's facts. Importing this package imports nothing.
"""

__all__ = [
    "automaton",
    "backend",
    "batching",
    "decoding",
    "drafting",
    "embedding",
    "kvcache",
    "llamacpp",
    "load",
    "sampling",
]
