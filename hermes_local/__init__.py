"""hermes-local: a local, offline task agent on llama.cpp.

Importing this package is cheap: it imports nothing (only `hermes_local.engines.inprocess` imports llama_cpp, lazily).
"""

__version__ = "0.1.0"
