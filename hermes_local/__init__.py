"""hermes-local: a local, offline task agent on llama.cpp.

Importing this package is cheap: it never imports llama_cpp (only `hermes_local.llm` does, lazily).
"""

__version__ = "0.1.0"
