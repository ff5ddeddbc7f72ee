"""Which model to run and what it needs: the registry, GGUF headers, downloads and memory estimates.

`registry.py` reads `models.toml` and resolves `--model`, `gguf.py` reads and checks GGUF headers,
`download.py` fetches through huggingface-hub (the only network use, and only when asked),
`footprint.py` estimates memory, `embeddings.py` picks long-term memory's embedding model and imports one
from a local file, `convert.py` converts a BERT checkpoint to GGUF. Loads and runs nothing: no engine is
imported here.
"""

__all__ = ["convert", "download", "embeddings", "footprint", "gguf", "registry"]
