"""The clock: `get_current_time`, the local date and time (the `time` toolset).

The agent's own value, so its result is trusted; volatile, so it is never served from a cache. A goal that asks
for the clock calls for it; one that only mentions a day ("what is on tomorrow?") does when no other tool fits.
Does not format dates for the model beyond ISO 8601.
"""

from __future__ import annotations

import re
from datetime import datetime

from hermes_local.tools.registry import Tool, tool
from hermes_local.tools.traits import Cue, Toolset, Traits

TIME = Toolset("time", "the current local date and time")
# The clock asked for; "the time of the meeting" or "the date in notes.txt" is not a clock question.
CLOCK = re.compile(
    r"\b(what time|time is it|the time now|current (?:time|date)|time right now|today'?s date|what date|"
    r"what day|day of the week|the date today|date and time)\b|现在|几点|时间|日期|今天|明天|昨天|星期几"
)
CLOCK_WEAK = re.compile(r"\b(the time|today|tonight|tomorrow|yesterday|date|clock|now)\b(?! of)")


@tool(  # the agent's own value
    volatile=True,
    provenance="trusted",
    traits=Traits(toolset=TIME, cues=(Cue(40, CLOCK.search), Cue(40, CLOCK_WEAK.search, last_resort=True))),
)
def get_current_time() -> str:
    """Get the current local date and time (ISO 8601, with timezone)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


TOOLS: list[Tool] = [get_current_time]  # the family's tools, in the registry's order
