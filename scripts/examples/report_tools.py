"""Tools for the `daily_report.toml` example workflow (loaded through its `tools_modules` or `--tools-module`)."""

from __future__ import annotations

from hermes_local.tools import tool


@tool
def day_over_day(today: float, yesterday: float) -> dict:
    """Day-over-day change between two totals: absolute, percent and direction.

    Args:
        today: Today's total.
        yesterday: Yesterday's total.
    """
    change = round(today - yesterday, 2)
    percent = None if yesterday == 0 else round(change / yesterday * 100, 1)
    direction = "up" if change > 0 else "down" if change < 0 else "flat"
    return {"today": today, "yesterday": yesterday, "change": change, "change_pct": percent, "direction": direction}
