"""Readable text for the CLI, from the API's models: tables, run trees, transcripts.

JSON values print as JSON; a value that is absent prints as ``-``; table columns are as
wide as their longest cell, so long ids never break them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from recorder.cli.output import json_text
from recorder.models import (
    Checkpoint,
    Event,
    ForkOrigin,
    Run,
    RunNode,
    State,
    Thread,
    ThreadDetail,
    Verification,
)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str):
        return value
    return json_text(value, indent=False)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[int] = ()
) -> str:
    """Columns padded to their widest cell (the last one is left ragged), measured in the
    columns a terminal gives each character (two for CJK and emoji, none for a combining
    mark)."""
    cells = [list(headers), *[[cell(v) for v in row] for row in rows]]
    widths = [max(shown_width(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            _pad(text, width, right=i in right)
            for i, (text, width) in enumerate(zip(row, widths, strict=True))
        ]
        parts[-1] = parts[-1].rstrip()
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def shown_width(text: str) -> int:
    """How many terminal columns ``text`` takes."""
    if text.isascii():
        return len(text)
    return sum(
        0
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf")
        else 2
        if unicodedata.east_asian_width(ch) in ("W", "F")
        else 1
        for ch in text
    )


def _pad(text: str, width: int, *, right: bool) -> str:
    fill = " " * (width - shown_width(text))
    return fill + text if right else text + fill


def threads_table(threads: Sequence[Thread], *, filtered: bool = False) -> str:
    if not threads:
        return "no threads match" if filtered else "no threads recorded"
    rows = [(t.thread_id, t.agent, t.run_count, t.latest_status, t.updated_at) for t in threads]
    return table(("THREAD", "AGENT", "RUNS", "STATUS", "UPDATED (UTC)"), rows, right=(2,))


def events_table(events: Sequence[Event]) -> str:
    if not events:
        return "no events"
    rows = [(e.seq, e.type or "(not an event)", e.origin, e.recorded_at) for e in events]
    return table(("SEQ", "TYPE", "ORIGIN", "RECORDED (UTC)"), rows, right=(0,))


def runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


def point_text(seq: int | None) -> str:
    """A point of a run, in words: its end (None), its start (-1), after an event."""
    if seq is None:
        return "at its end"
    return "at its start" if seq == -1 else f"after seq {seq}"


def origin_text(origin: ForkOrigin) -> str:
    where = (
        f"thread {origin.thread_id}, run {origin.run_id}"
        if origin.thread_id is not None
        else f"run {origin.run_id} (not recorded here)"
    )
    return f"{where} {point_text(origin.seq)}"


def thread_text(thread: ThreadDetail, state: State) -> str:
    lines = [f"thread {thread.thread_id}  ({runs(thread.run_count)}, agent {cell(thread.agent)})"]
    if thread.forked_from is not None:
        lines.append(f"forked from {origin_text(thread.forked_from)}")
    lines.append("")
    forks: dict[str, list[Thread]] = {}
    for fork in thread.forks:
        if fork.forked_from is not None:
            forks.setdefault(fork.forked_from.run_id, []).append(fork)
    for root in thread.runs:
        _tree(root, "", lines, forks)
    lines += ["", "conversation now:", *transcript(state)]
    return "\n".join(lines)


def run_text(run: Run, state: State) -> str:
    parent = cell(run.parent_run_id) + (" (inferred)" if run.parent_inferred else "")
    if run.parent_seq is not None:
        parent += " at its start" if run.parent_seq == -1 else f" at seq {run.parent_seq}"
    lines = [
        f"run {run.run_id}  thread {run.thread_id}  agent {cell(run.agent)}",
        f"status {run.status}  outcome {cell(run.outcome)}  events {run.event_count}"
        + (f"  duration {run.duration_ms} ms" if run.duration_ms is not None else ""),
        f"parent {parent}",
    ]
    if run.error:
        lines.append(f"error: {run.error}")
    for v in run.violations:
        lines.append(f"violation at seq {cell(v.seq)}: {v.message}")
    lines += ["", "conversation at its end:", *transcript(state)]
    return "\n".join(lines)


def _tree(node: RunNode, indent: str, lines: list[str], forks: dict[str, list[Thread]]) -> None:
    fork = ""
    if node.parent_seq == -1:
        fork = "  forked at its start"
    elif node.parent_seq is not None:
        fork = f"  forked at seq {node.parent_seq}"
    elif node.parent_inferred:
        fork = "  (parent inferred)"
    lines.append(f"{indent}- {node.run_id}  {node.status}  {node.event_count} events{fork}")
    for other in forks.get(node.run_id, []):
        seq = other.forked_from.seq if other.forked_from is not None else None
        lines.append(
            f"{indent}  > forked into thread {other.thread_id} {point_text(seq)}"
            f"  ({runs(other.run_count)})"
        )
    for child in node.children:
        _tree(child, indent + "  ", lines, forks)


def state_text(at: State) -> str:
    point = "its end" if at.seq is None else f"seq {at.seq}"
    head = f"thread {at.thread_id}  run {cell(at.run_id)}  at {point}"
    lines = [head, *transcript(at)]
    for problem in at.problems:
        lines.append(f"  problem at event {problem.index}: {problem.message}")
    return "\n".join(lines)


def transcript(at: State | Checkpoint) -> list[str]:
    lines = [_message(m) for m in at.messages]
    for interrupt in at.pending_interrupts:
        reason = cell(interrupt.get("reason"))
        message = interrupt.get("message")
        lines.append(f"  waiting: {reason}" + (f" {message}" if message else ""))
    lines.append(f"  state: {json_text(at.state, indent=False)}")
    return [line for line in lines if line]


def _message(m: dict[str, Any]) -> str:
    role = cell(m.get("role"))
    content = m.get("content")
    if isinstance(content, list):
        content = " ".join(
            str(p.get("text", f"[{p.get('type')}]")) if isinstance(p, dict) else cell(p)
            for p in content
        )
    if role == "reasoning":
        return f"  (thinking) {cell(content)[:100]}"
    if role == "tool":
        return f"  [tool result {cell(m.get('toolCallId'))}] {cell(content)}"
    if role == "activity":
        return f"  [activity {cell(m.get('activityType'))}]"
    lines = [f"  {role}: {cell(content)}"] if content else []
    for call in m.get("toolCalls") or []:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        lines.append(f"  {role} calls {cell(fn.get('name'))}({cell(fn.get('arguments'))})")
    return "\n".join(lines)


def history_text(thread_id: str, checkpoints: Sequence[Checkpoint]) -> str:
    if not checkpoints:
        return f"thread {thread_id}: no runs"
    rows = []
    for c in checkpoints:
        last = c.messages[-1] if c.messages else {}
        said = f"{cell(last.get('role'))}: {cell(last.get('content'))}" if last else "-"
        rows.append((c.run_id, c.boundary, c.seq, c.status, len(c.messages), said[:60]))
    return table(("RUN", "AT", "SEQ", "STATUS", "MESSAGES", "LAST MESSAGE"), rows, right=(2, 4))


def verification_text(report: Verification) -> str:
    if report.ok:
        return f"ok: {report.event_count} events"
    return report.violations[0].message
