"""Readable text for the CLI: thread lists, run trees, transcripts."""

from __future__ import annotations

from typing import Any

from recorder.errors import RunNotFound, ThreadNotFound
from recorder.runtime import Runtime
from recorder.store import ThreadFilter
from recorder.timetravel.views import run_tree, run_view, thread_view


async def threads(
    runtime: Runtime, agent: str | None, status: str | None, text: str | None, limit: int
) -> str:
    page = await runtime.store.list_threads(
        ThreadFilter(agent, status, None, None, text), limit=limit
    )
    return threads_table([thread_view(t) for t in page.items])


def threads_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no threads recorded"
    lines = [f"{'THREAD':<28} {'AGENT':<10} {'RUNS':>4}  {'STATUS':<11} UPDATED"]
    for t in rows:
        lines.append(
            f"{t['threadId']:<28} {t['agent'] or '-':<10} {t['runCount']:>4}  "
            f"{t['latestStatus'] or '-':<11} {t['updatedAt']}"
        )
    return "\n".join(lines)


async def show(runtime: Runtime, ident: str) -> str:
    store = runtime.store
    try:
        thread = await store.get_thread(ident)
    except ThreadNotFound:
        try:
            run = await store.get_run(ident)
        except RunNotFound:
            raise ThreadNotFound(ident) from None
        state = (await runtime.history.project(run)).to_json()
        return run_text(run_view(run), state)
    runs = await store.list_runs(ident)
    latest = await store.get_run(thread.latest_run_id or runs[-1].run_id)
    state = (await runtime.history.project(latest)).to_json()
    return thread_text({**thread_view(thread), "runs": run_tree(runs)}, state)


def thread_text(thread: dict[str, Any], state: dict[str, Any]) -> str:
    lines = [
        f"thread {thread['threadId']}  ({thread['runCount']} runs, agent {thread['agent']})",
        "",
    ]
    for root in thread["runs"]:
        _tree(root, "", lines)
    lines += ["", "conversation now:", *transcript(state)]
    return "\n".join(lines)


def run_text(run: dict[str, Any], state: dict[str, Any]) -> str:
    lines = [
        f"run {run['runId']}  thread {run['threadId']}  agent {run['agent']}",
        f"status {run['status']}  outcome {run['outcome']}  events {run['eventCount']}"
        f"  duration {run['durationMs']} ms",
        f"parent {run['parentRunId']}" + (" (inferred)" if run["parentInferred"] else ""),
    ]
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    for v in run.get("violations") or []:
        lines.append(f"violation at seq {v.get('seq')}: {v.get('message')}")
    lines += ["", "conversation at its end:", *transcript(state)]
    return "\n".join(lines)


def _tree(node: dict[str, Any], indent: str, lines: list[str]) -> None:
    fork = ""
    if node["parentSeq"] is not None:
        fork = f"  forked at seq {node['parentSeq']}"
    elif node["parentInferred"]:
        fork = "  (parent inferred)"
    lines.append(f"{indent}- {node['runId']}  {node['status']}  {node['eventCount']} events{fork}")
    for child in node["children"]:
        _tree(child, indent + "  ", lines)


def transcript(state: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for m in state.get("messages", []):
        role = m.get("role")
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", f"[{p.get('type')}]")) for p in content)
        if role == "reasoning":
            lines.append(f"  (thinking) {str(content)[:100]}")
        elif role == "tool":
            lines.append(f"  [tool result {m.get('toolCallId')}] {content}")
        elif role == "activity":
            lines.append(f"  [activity {m.get('activityType')}]")
        else:
            if content:
                lines.append(f"  {role}: {content}")
            for call in m.get("toolCalls") or []:
                fn = call.get("function", {})
                lines.append(f"  {role} calls {fn.get('name')}({fn.get('arguments')})")
    if state.get("pendingInterrupts"):
        for i in state["pendingInterrupts"]:
            lines.append(f"  ⏸ waiting: {i.get('reason')} {i.get('message') or ''}".rstrip())
    lines.append(f"  state: {state.get('state')}")
    return lines
