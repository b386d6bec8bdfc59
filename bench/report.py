"""Rows of results, their statistics, the one table, and the JSON file.

A row pairs the project's figure with a baseline measured in the same run, round by round:
``ours[i]`` and ``base[i]`` come from round ``i``, so the ratio of each round cancels most of
the drift of a shared, noisy machine. The table shows medians with the min-max over rounds.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import orjson


@dataclass(slots=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))


@dataclass(slots=True)
class Row:
    """One line of the table: ours next to its baseline (both per round, same units)."""

    bench: str
    name: str
    unit: str  # "ev/s", "ms", "turns/s", "B/turn"
    ours: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    target: str = ""
    # Given the medians of ours, base and their ratio: True (met), False (missed), None.
    check: Callable[[float, float, float], bool | None] | None = None
    note: str = ""
    skipped: str = ""
    error: str = ""

    def ratios(self) -> list[float]:
        return [o / b for o, b in zip(self.ours, self.base, strict=False) if b]

    def status(self) -> str:
        if self.error:
            return "ERROR"
        if self.skipped:
            return "skipped"
        if self.check is None or not self.ours or not self.base:
            return "-"
        ours, base = Spread.of(self.ours).median, Spread.of(self.base).median
        met = self.check(ours, base, Spread.of(self.ratios()).median)
        return "-" if met is None else ("ok" if met else "MISS")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bench": self.bench,
            "name": self.name,
            "unit": self.unit,
            "target": self.target,
            "status": self.status(),
            "note": self.note,
        }
        if self.skipped or self.error:
            out["skipped" if self.skipped else "error"] = self.skipped or self.error
            return out
        out["ours"] = {"rounds": self.ours, **_spread_json(self.ours)}
        out["baseline"] = {"rounds": self.base, **_spread_json(self.base)}
        out["ratio"] = {"rounds": self.ratios(), **_spread_json(self.ratios())}
        return out


def at_least(minimum: float) -> Callable[[float, float, float], bool | None]:
    return lambda _ours, _base, ratio: ratio >= minimum


def at_most(maximum: float) -> Callable[[float, float, float], bool | None]:
    return lambda _ours, _base, ratio: ratio <= maximum


def _spread_json(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    spread = Spread.of(values)
    return {"median": spread.median, "min": spread.low, "max": spread.high}


def human(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.3g}" if value < 10 else f"{value:,.0f}"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}k"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.3g}"


def cell(values: list[float], unit: str) -> str:
    if not values:
        return ""
    spread = Spread.of(values)
    text = f"{human(spread.median, unit)} {unit}"
    if len(values) > 1:
        text += f" [{human(spread.low, unit)}-{human(spread.high, unit)}]"
    return text


def ratio_cell(values: list[float]) -> str:
    if not values:
        return ""
    spread = Spread.of(values)
    text = f"{spread.median:.2f}x"
    if len(values) > 1:
        text += f" [{spread.low:.2f}-{spread.high:.2f}]"
    return text


HEADER = ("benchmark", "ours (median [min-max])", "baseline", "ours/baseline", "target", "status")


def table(rows: list[Row]) -> str:
    """The results as a Markdown table (readable as plain text too), notes below it."""
    lines = [HEADER]
    notes: list[str] = []
    for row in rows:
        label = f"{row.bench}: {row.name}"
        if row.skipped or row.error:
            lines.append((label, "", "", "", row.target, row.status()))
            notes.append(f"{label}: {row.skipped or row.error}")
            continue
        lines.append(
            (
                label,
                cell(row.ours, row.unit),
                cell(row.base, row.unit),
                ratio_cell(row.ratios()),
                row.target,
                row.status(),
            )
        )
        if row.note:
            notes.append(f"{label}: {row.note}")
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    out = []
    for index, line in enumerate(lines):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
        if index == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    if notes:
        out.append("")
        out.extend(f"- {note}" for note in notes)
    return "\n".join(out)


def machine() -> dict[str, Any]:
    versions = {}
    for package in (
        "uvicorn",
        "uvloop",
        "httptools",
        "starlette",
        "fastapi",
        "httpx",
        "orjson",
        "aiosqlite",
        "asyncpg",
        "sqlalchemy",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.machine(),
        "sqlite": sqlite3.sqlite_version,
        "packages": versions,
    }


def machine_line(info: dict[str, Any]) -> str:
    packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
    pg = f", PostgreSQL {info['postgresql']}" if info.get("postgresql") else ""
    return (
        f"nproc {info['nproc']}, Python {info['python']} ({info['platform']}), "
        f"SQLite {info['sqlite']}{pg}; {packages}"
    )


def write_json(path: str, rows: list[Row], info: dict[str, Any], settings: dict[str, Any]) -> None:
    document = {
        "machine": info,
        "settings": settings,
        "rows": [row.to_json() for row in rows],
    }
    with open(path, "wb") as out:
        out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2))
