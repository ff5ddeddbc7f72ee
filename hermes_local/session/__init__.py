"""Sessions: each run's append-only JSONL log of typed events under `$HERMES_LOCAL_HOME/sessions/` (`log.py`:
writing, reading, resuming, rating, listing), and how those events read to a person (`describe.py`: the lines a
terminal shows live and `sessions show` prints). Does not run the agent or print.
"""

from __future__ import annotations

from hermes_local.session.describe import SHOWN_LIVE, delegations, describe_event, describe_events, describe_reply
from hermes_local.session.log import (
    VERDICTS,
    SessionInfo,
    SessionLog,
    check_session_id,
    events_to_continue,
    events_to_resume,
    last_rating,
    list_sessions,
    new_session_id,
    rate_session,
    read_events,
    read_records,
    recorded_dialect,
    session_path,
    sessions_dir,
    valid_session_id,
)

__all__ = [
    "SHOWN_LIVE",
    "VERDICTS",
    "SessionInfo",
    "SessionLog",
    "check_session_id",
    "delegations",
    "describe_event",
    "describe_events",
    "describe_reply",
    "events_to_continue",
    "events_to_resume",
    "last_rating",
    "list_sessions",
    "new_session_id",
    "rate_session",
    "read_events",
    "read_records",
    "recorded_dialect",
    "session_path",
    "sessions_dir",
    "valid_session_id",
]
