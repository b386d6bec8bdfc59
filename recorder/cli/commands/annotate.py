"""Annotations beside the log: ``tag``, ``note``, ``score``, ``annotations``."""

from __future__ import annotations

import argparse

from recorder.cli.context import Context
from recorder.cli.parser import Commands
from recorder.errors import InputError, NotFound
from recorder.models import Annotated, ThreadAnnotations


def register(commands: Commands) -> None:
    p = commands.add("tag", tag, "set or remove tags on a thread or a run", data=True, json=True)
    target(p)
    p.add_argument("tags", nargs="*", metavar="KEY=VALUE", help="tags to set")
    p.add_argument("--remove", action="append", default=[], metavar="KEY", help="a tag to drop")

    p = commands.add(
        "note", note, "add a note to a thread or a run, or remove one", data=True, json=True
    )
    target(p)
    p.add_argument("text", nargs="?", help="the note (not with --remove)")
    p.add_argument("--author")
    p.add_argument("--remove", metavar="NOTE_ID", help="remove this note of the thread")

    p = commands.add("score", score, "score a thread or a run", data=True, json=True)
    target(p)
    p.add_argument("value", nargs="?", type=float, help="a number")
    p.add_argument("--author")
    p.add_argument("--clear", action="store_true", help="remove the score")

    p = commands.add(
        "annotations", show_annotations, "a thread's tags, notes and scores", data=True, json=True
    )
    p.add_argument("thread")


def target(p: argparse.ArgumentParser) -> None:
    p.add_argument("thread", help="the thread (with --run: the run's thread)")
    p.add_argument("--run", help="annotate this run of the thread instead")


async def tag(context: Context) -> int:
    args = context.args
    changes: dict[str, str | None] = {}
    for spec in args.tags:
        key, separator, value = spec.partition("=")
        if not separator or not key:
            raise InputError(f"a tag is KEY=VALUE, got {spec!r}")
        changes[key] = value
    both = sorted(set(changes) & set(args.remove))
    if both:
        raise InputError(f"tag {both[0]!r} is both set and removed")
    changes.update(dict.fromkeys(args.remove))
    if not changes:
        raise InputError("give tags to set (KEY=VALUE) or to remove (--remove KEY)")
    async with context.backend() as backend:
        await _check_run(backend, args)
        saved = await backend.set_tags(changes, thread_id=args.thread, run_id=args.run)
    context.out.data(saved, lambda: annotations_text(saved))
    return 0


async def note(context: Context) -> int:
    args = context.args
    if args.remove is not None:
        if args.text is not None or args.author is not None or args.run is not None:
            raise InputError("--remove NOTE_ID takes no text, --author or --run")
        async with context.backend() as backend:
            saved = await backend.annotations(args.thread)
            notes = [*saved.notes, *(n for run in saved.runs.values() for n in run.notes)]
            if all(n.note_id != args.remove for n in notes):
                raise NotFound(f"thread {args.thread!r} has no note {args.remove!r}")
            saved = await backend.remove_note(args.remove)
        context.out.data(saved, lambda: annotations_text(saved))
        return 0
    if args.text is None:
        raise InputError("give the note's text (or --remove NOTE_ID)")
    async with context.backend() as backend:
        await _check_run(backend, args)
        added = await backend.add_note(
            args.text, author=args.author, thread_id=args.thread, run_id=args.run
        )
    context.out.data(added, lambda: f"added {added.note_id}")
    return 0


async def score(context: Context) -> int:
    args = context.args
    if (args.value is None) == (not args.clear):
        raise InputError("give a score, or --clear")
    async with context.backend() as backend:
        await _check_run(backend, args)
        saved = await backend.set_score(
            None if args.clear else args.value,
            author=args.author,
            thread_id=args.thread,
            run_id=args.run,
        )
    context.out.data(saved, lambda: annotations_text(saved))
    return 0


async def show_annotations(context: Context) -> int:
    async with context.backend() as backend:
        saved = await backend.annotations(context.args.thread)
    context.out.data(saved, lambda: annotations_text(saved))
    return 0


async def _check_run(backend: object, args: argparse.Namespace) -> None:
    """A run named with --run must be one of the thread's (the store checks it too)."""
    if args.run is not None:
        run = await backend.run(args.run)  # type: ignore[attr-defined]
        if run.thread_id != args.thread:
            raise InputError(f"run {args.run!r} is not a run of thread {args.thread!r}")


def annotations_text(saved: ThreadAnnotations) -> str:
    lines = [f"thread {saved.thread_id}"]
    lines += _annotated(saved, "  ")
    for run_id, run in saved.runs.items():
        lines.append(f"  run {run_id}")
        lines += _annotated(run, "    ")
    return "\n".join(lines)


def _annotated(item: Annotated, indent: str) -> list[str]:
    lines = []
    if item.tags:
        lines.append(indent + "tags: " + ", ".join(f"{k}={v}" for k, v in item.tags.items()))
    if item.score is not None:
        by = f" by {item.score.author}" if item.score.author else ""
        lines.append(f"{indent}score: {item.score.value:g}{by}")
    for n in item.notes:
        by = f" {n.author}" if n.author else ""
        when = n.created_at.strftime("%Y-%m-%d %H:%M")
        lines.append(f"{indent}note {n.note_id} ({when}{by}): {n.text}")
    return lines
