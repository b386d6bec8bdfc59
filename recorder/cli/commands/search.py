"""Searching recorded content: ``search``, ``reindex``."""

from __future__ import annotations

from recorder.cli.context import Context
from recorder.cli.parser import Commands
from recorder.models import SEARCH_KINDS, SearchHit, SearchPage
from recorder.timetravel.annotating import parse_tags


def register(commands: Commands) -> None:
    p = commands.add(
        "search",
        search,
        "find text in recorded messages, tool calls, reasoning, errors and posted input",
        data=True,
        json=True,
    )
    p.add_argument("query", nargs="?", default="", help="words to find (all of them)")
    p.add_argument(
        "--syntax",
        action="store_true",
        help='read the query as a query: "a phrase", OR, -excluded, prefix*',
    )
    p.add_argument("--agent")
    p.add_argument("--kind", choices=SEARCH_KINDS)
    p.add_argument("--tool", help="a tool call's name")
    p.add_argument("--status", help="the run's status")
    p.add_argument("--error-code", help="a RUN_ERROR's code (e.g. upstream_idle)")
    p.add_argument("--since", help="recorded at or after (ISO-8601 or epoch seconds)")
    p.add_argument("--until", help="recorded at or before (ISO-8601 or epoch seconds)")
    p.add_argument("--thread", help="only this thread")
    p.add_argument("--tag", action="append", metavar="KEY:VALUE", help="on the hit's thread or run")
    p.add_argument("--limit", type=int, default=20, help="hits per page (default 20)")
    p.add_argument("--cursor", help="the page after this cursor (printed when there is more)")
    p.add_argument("--all", action="store_true", help="every page")

    commands.add(
        "reindex", reindex, "drop the search index and build it again from the log", data=True
    )


async def search(context: Context) -> int:
    args = context.args
    filters = {
        "syntax": args.syntax,
        "agent": args.agent,
        "kind": args.kind,
        "tool": args.tool,
        "status": args.status,
        "error_code": args.error_code,
        "since": args.since,
        "until": args.until,
        "thread_id": args.thread,
        "limit": args.limit,
        "tags": dict(parse_tags(args.tag)),
    }
    async with context.backend() as backend:
        page = await backend.search(args.query, cursor=args.cursor, **filters)
        found = list(page.hits)
        while args.all and page.next_cursor is not None:
            page = await backend.search(args.query, cursor=page.next_cursor, **filters)
            found += page.hits
    answer = SearchPage(hits=found, next_cursor=page.next_cursor)
    context.out.data(answer, lambda: hits_text(answer.hits))
    if answer.next_cursor is not None and not context.out.json:
        context.out.note(f"more hits: --cursor {answer.next_cursor} (or --all)")
    return 0


def hits_text(hits: list[SearchHit]) -> str:
    """Each hit: where it is (thread, run, seqs, kind), then its snippet with [matches]."""
    if not hits:
        return "no hits"
    lines = []
    for hit in hits:
        seqs = "input" if hit.seq_from < 0 else f"seq {hit.seq_from}-{hit.seq_to}"
        what = hit.kind + (f" {hit.tool_name}" if hit.tool_name else "")
        what += f" {hit.error_code}" if hit.error_code else ""
        when = hit.recorded_at.strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{hit.thread_id}  {hit.run_id}  {seqs}  {what}  {when}")
        lines.append("    " + marked(hit.snippet, hit.highlights).replace("\n", " "))
    return "\n".join(lines)


def marked(text: str, highlights: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in sorted(highlights):
        if start < at:
            continue
        out += [text[at:start], "[", text[start:end], "]"]
        at = end
    out.append(text[at:])
    return "".join(out)


async def reindex(context: Context) -> int:
    async with context.backend() as backend:
        report = await backend.reindex()
    context.out.line(f"indexed {report.runs} runs")
    return 0
