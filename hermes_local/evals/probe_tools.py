"""The one tool of the qualification probes that no built-in covers: nested arguments (`models qualify`).

`book_meeting(meeting)` takes an object holding a list and another object, so the probe checks that a model
writes nested JSON a schema describes. It books nothing: it returns the meeting it was given, as a
confirmation. Loaded by module name from the probe cases (`evals/qualify.py`).
"""

from __future__ import annotations

from pydantic import BaseModel

from hermes_local.tools.registry import tool


class Slot(BaseModel):
    """When: a weekday and a 24-hour time."""

    day: str
    time: str


class Meeting(BaseModel):
    """A meeting: its title, who attends, and when."""

    title: str
    attendees: list[str]
    when: Slot


@tool(provenance="trusted")
def book_meeting(meeting: Meeting) -> str:
    """Book a meeting in the calendar.

    Args:
        meeting: the title, the attendees' names and the slot (day and time)
    """
    names = ", ".join(meeting.attendees)
    return f"Booked {meeting.title!r} with {names} on {meeting.when.day} at {meeting.when.time}."
