"""The process jail and the offline rule: ground code that imports nothing of the package but errors/textsafe.

`policy.py` builds the bubblewrap command for `run_shell` and stdio MCP servers, `procs.py` owns process
groups (spawning with limits, the reaper, killing what a run started), `cgroup.py` the pids cgroups that cap
and find a command's processes, `net.py` the offline rule (loopback or an allow-listed host).
"""

__all__ = ["cgroup", "net", "policy", "procs"]
