"""Create the demo SQLite database for `daily_report.toml`: an `orders` table over the last few days.

    python scripts/examples/make_orders_db.py orders.db [--date 2024-05-02] [--days 7] [--seed 7]

The data is made up but deterministic for a given date, number of days and seed. The file is replaced if it
exists. Importable: `make_orders_db(path, day)` returns the total per day so tests can check the report.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
from datetime import date, datetime, time, timedelta
from pathlib import Path

PRODUCTS = {"widget": 12.5, "gadget": 30.0, "gizmo": 7.25, "doohickey": 49.9}
CUSTOMERS = ["acme", "globex", "initech", "umbrella", "hooli", "stark"]


def make_orders_db(path: Path, day: date, days: int = 7, seed: int = 7) -> dict[str, float]:
    """Write `path` with orders for `days` days ending on `day`; returns {ISO day: total amount}."""
    rng = random.Random(f"{seed}-{day.isoformat()}-{days}")
    path = Path(path)
    path.unlink(missing_ok=True)
    totals: dict[str, float] = {}
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, customer TEXT NOT NULL, "
            "product TEXT NOT NULL, quantity INTEGER NOT NULL, amount REAL NOT NULL)"
        )
        for offset in range(days - 1, -1, -1):
            current = day - timedelta(days=offset)
            total = 0.0
            for _ in range(rng.randint(5, 15)):
                product = rng.choice(sorted(PRODUCTS))
                quantity = rng.randint(1, 4)
                amount = round(PRODUCTS[product] * quantity, 2)
                at = datetime.combine(current, time(rng.randint(8, 19), rng.randint(0, 59)))
                conn.execute(
                    "INSERT INTO orders (created_at, customer, product, quantity, amount) VALUES (?, ?, ?, ?, ?)",
                    (at.isoformat(sep=" "), rng.choice(CUSTOMERS), product, quantity, amount),
                )
                total += amount
            totals[current.isoformat()] = round(total, 2)
        conn.commit()
    finally:
        conn.close()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the database file to create (replaced if it exists)")
    parser.add_argument("--date", type=date.fromisoformat, default=date.today(), help="last day (default: today)")
    parser.add_argument("--days", type=int, default=7, help="how many days of orders (default 7)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    totals = make_orders_db(args.path, args.date, args.days, args.seed)
    for day, total in totals.items():
        print(f"{day}  {total:10.2f}")
    print(f"wrote {args.path}")


if __name__ == "__main__":
    main()
