"""What tools do to the workspace, kept so it can be shown and undone.

`confined.py` is the one door through which tools touch workspace files (every path walked by directory fds;
every change checkpointed first), `checkpoints.py` keeps what each write or dangerous call changed (recorded
before the change), `snapshot.py` brackets a command (or a tool module's, an MCP server's write) with two scans
of the workspace and opens a run's recorder, `undo.py` shows and undoes a session's changes (`sessions diff`,
`sessions undo`). Does not decide which calls run (approval, execution) and defines no tool.
"""

__all__ = []
