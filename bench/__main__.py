"""Run every benchmark and print one table: ours, the baseline measured beside it, the ratio.

    python -m bench                  # the full run (several minutes)
    python -m bench --quick          # small counts, 1-2 rounds, under a minute
    python -m bench --only proxy     # one benchmark (comma-separate for several)
    python -m bench --json out.json  # also write every round's figures

Workloads, targets and the latest results: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path

from bench import (
    chain,
    fold,
    inprocess,
    intake,
    journal,
    peers,
    proxy,
    redaction,
    replay,
    search,
    state,
    store,
    telemetry,
    ttfe,
)
from bench.context import Context, Plan, Postgres
from bench.report import Row, machine, machine_line, table, write_json
from bench.servers import ServerPool, quiet

Benchmark = Callable[[Context], Awaitable[list[Row]]]

BENCHMARKS: dict[str, tuple[Benchmark, str]] = {
    "proxy": (proxy.run, "recording proxy throughput vs bare pass-through and direct"),
    "ttfe": (ttfe.run, "time to first event, direct vs through the recorder"),
    "replay": (replay.run, "SSE replay of a recorded run vs the upstream read directly"),
    "append": (store.run_append, "EventStore.append vs the raw driver"),
    "read": (store.run_read, "EventStore.read_events vs the raw driver"),
    "chain": (chain.run, "EventStore.append with the hash chain vs without"),
    "fold": (fold.run, "projector.fold vs orjson.loads only"),
    "state": (state.run, "state at a point of a long run vs folding from its start"),
    "peers": (peers.run, "vs LangGraph's checkpointers: write, read at a point, size"),
    "inprocess": (inprocess.run, "in-process recording vs the app alone and vs the proxy"),
    "telemetry": (telemetry.run, "the proxy with its Prometheus metrics on vs off"),
    "intake": (intake.run, "the proxy's request checks vs only parsing the body"),
    "journal": (journal.run, "the journal: store forced down vs healthy; on vs off, healthy"),
    "search": (search.run, "search over a large database; indexing on vs off"),
    "redaction": (redaction.run, "the proxy with the built-in redaction rules on vs off"),
}
# These share one set of servers.
HTTP = {
    "proxy",
    "ttfe",
    "replay",
    "inprocess",
    "telemetry",
    "journal",
    "search",
    "redaction",
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of agui-recorder, each beside its baseline, in one table.",
        epilog="benchmarks: " + ", ".join(BENCHMARKS),
    )
    parser.add_argument("--quick", action="store_true", help="small counts, 1-2 rounds")
    parser.add_argument("--only", metavar="NAME", help="run only these (comma-separated)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    # proxy's 200 streams at once leave the shared servers minutes of checkpoints and
    # indexing to do (the recorder's work, but not what the next benchmark measures): it
    # runs after the others that share them.
    args.names = sorted(names, key=lambda name: name == "proxy")
    return args


async def run(args: argparse.Namespace) -> int:
    plan = Plan.small() if args.quick else Plan.full()
    info = machine()
    failed = False
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="agui-bench-") as workdir:
        ctx = Context(plan, Path(workdir), ServerPool(Path(workdir)), Postgres())
        try:
            if await ctx.pg.available():
                info["postgresql"] = ctx.pg.version
            mode = "quick" if plan.quick else "full"
            print(f"# {mode} run on {machine_line(info)}", file=sys.stderr, flush=True)
            for index, name in enumerate(args.names):
                # A quick run's figures mean nothing (it is the suite's smoke run, beside
                # the rest of the suite): it waits for no quiet machine.
                waited = await quiet(timeout=0.0 if plan.quick else 60.0)
                started = time.perf_counter()
                print(
                    f"# {name}: {BENCHMARKS[name][1]} (after {waited:.1f} s waiting for a "
                    "quiet machine) ...",
                    file=sys.stderr,
                    flush=True,
                )
                try:
                    rows.extend(await BENCHMARKS[name][0](ctx))
                except Exception as exc:
                    failed = True
                    traceback.print_exc()
                    rows.append(Row(name, "failed", "", error=f"{type(exc).__name__}: {exc}"))
                took = time.perf_counter() - started
                print(f"# {name}: {took:.1f} s", file=sys.stderr, flush=True)
                if name in HTTP and not HTTP & set(args.names[index + 1 :]):
                    await ctx.pool.close()
        finally:
            await ctx.pool.close()
            await ctx.pg.drop_all()
    print(f"Machine: {machine_line(info)}")
    print(f"Mode: {'--quick' if plan.quick else 'full'}; {len(rows)} rows\n")
    print(table(rows))
    if args.json:
        settings = {"quick": plan.quick, "benchmarks": args.names, "plan": asdict(plan)}
        write_json(args.json, rows, info, settings)
    return 1 if failed else 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # so the finally blocks stop the servers and drop the databases


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        return runner.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
