"""``recorder redact``: a redaction rule applied to what is already recorded."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from recorder.cli.context import Context
from recorder.cli.local import describe_database, open_database
from recorder.cli.parser import Commands
from recorder.client.transport import shown
from recorder.config import RedactionConfig, RedactionRule
from recorder.errors import InputError
from recorder.timetravel.audit import CLI
from recorder.timetravel.history import History
from recorder.timetravel.indexing import Indexer
from recorder.timetravel.redact import redact_recorded


def register(commands: Commands) -> None:
    p = commands.add(
        "redact",
        redact,
        "apply redaction rules to recorded events (a sanctioned rewrite, chains re-sealed)",
        db=True,
        json=True,
    )
    p.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="RULE",
        help="a detector (email, card, token, ip, phone; builtin: all), a rule of the "
        "settings' [redaction] by name, or NAME=REGEX (repeat)",
    )
    p.add_argument("--thread", action="append", default=[], metavar="T", help="a thread (repeat)")
    p.add_argument("--reason", help="why (kept in the rewrite's record)")
    p.add_argument("--dry-run", action="store_true", help="list what would change; change nothing")


def rules_from(names: list[str], configured: tuple[RedactionRule, ...]) -> list[RedactionRule]:
    if not names:
        raise InputError("name at least one rule (--rule)")
    by_name = {rule.name: rule for rule in configured}
    rules: list[RedactionRule] = []
    for name in names:
        try:
            if name in by_name:
                rules.append(by_name[name])
            elif "=" in name:
                label, pattern = name.split("=", 1)
                rules.append(RedactionRule(name=label, pattern=pattern))
            else:
                rules += RedactionConfig.model_validate({"rules": [name]}).rules
        except ValidationError as exc:
            problem = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            if "=" not in name:  # an unknown name: say every kind of rule there is
                known = ", ".join([*sorted(by_name), "email", "phone", "card", "token", "ip"])
                problem = f"no such rule: give one of {known}, builtin (all five), or NAME=REGEX"
            raise InputError(f"--rule {name!r}: {problem}") from None
    return rules


async def redact(context: Context) -> int:
    args = context.args
    settings = context.settings()
    rules = rules_from(args.rule, settings.redaction.rules)
    if settings.url and args.db is None:
        raise InputError(
            "redact rewrites the database itself (a sanctioned rewrite), not through a "
            f"server: RECORDER_URL ({shown(settings.url)}) is set; give --db URL"
        )
    store = await open_database(settings, create=False)
    try:
        history = History(store, checkpoint_every=settings.checkpoint_every)
        report = await redact_recorded(
            store,
            rules,
            args.thread,
            actor=CLI,
            reason=args.reason,
            dry_run=args.dry_run,
            history=history,
            indexer=Indexer(store) if settings.search_index else None,
            key=settings.redaction.key,
        )
    finally:
        await store.close()
    answer = report.view()
    context.out.data(answer, lambda: _text(answer, args.dry_run))
    context.out.detail(
        f"{'read' if args.dry_run else 'rewrote'} the database {describe_database(settings.db)}"
    )
    return 0


def _text(answer: dict[str, Any], dry_run: bool) -> str:
    verb = "would rewrite" if dry_run else "rewrote"
    lines = [f"{verb} {answer['events']} events in {len(answer['runs'])} runs"]
    for run in answer["runs"]:
        seqs = ", ".join(str(seq) for seq in run["rewritten"])
        line = f"  {run['runId']} ({run['threadId']}): seqs {seqs}; rules {', '.join(run['rules'])}"
        if not dry_run:
            line += f"; record {run['record']}"
        lines.append(line)
    lines += [f"  {run}: skipped, still recording" for run in answer["skipped"]]
    if answer["inputs"]:
        lines.append(f"{verb} the posted inputs of {len(answer['inputs'])} runs")
        lines += [
            f"  {run['runId']} ({run['threadId']}): rules {', '.join(run['rules'])}"
            for run in answer["inputs"]
        ]
    verb = "would redact" if dry_run else "redacted"
    if answer["errors"]:
        lines.append(f"{verb} the error of runs: {', '.join(answer['errors'])}")
    if answer["summaries"]:
        lines.append(f"{verb} the summary of threads: {', '.join(answer['summaries'])}")
    return "\n".join(lines)
