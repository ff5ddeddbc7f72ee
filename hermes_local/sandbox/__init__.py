"""The process jail and the offline rule: ground code that imports nothing of the package but errors/textsafe.

`policy.py` builds the bubblewrap command for `run_shell` and stdio MCP servers, `protect.py` the agent's own
state and code that every sandbox masks, `workspace.py` the pinned workspace (one directory fd), `procs.py` owns process
groups (spawning with limits, the reaper, killing what a run started), `cgroup.py` the pids cgroups that cap
and find a command's processes, `net.py` the offline rule (loopback or an allow-listed host).
"""

__all__ = ["cgroup", "net", "policy", "procs", "protect", "workspace"]
