"""The process jail and the offline rule: ground code that imports nothing of the package but errors/textsafe.

`policy.py` builds the bubblewrap command for `run_shell` and stdio MCP servers, `procs.py` owns process
groups (the reaper, cgroups, killing what a run started), `net.py` is the offline rule (loopback or an
allow-listed host).
"""

__all__ = ["net", "policy", "procs"]
