"""The services one recorder process runs, shared by the HTTP API and the CLI.

Telemetry comes from the settings: Prometheus metrics (``metrics``, served apart with
``metrics_address``), a log line per ended run, and traces when ``otel_endpoint`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from recorder.config import Settings
from recorder.errors import ConfigError, RunNotFound, StoreError, StoreUnavailable
from recorder.proxy.journaled import JournaledStore, open_journaled
from recorder.proxy.proxy import Proxy, new_owner
from recorder.proxy.upstream import UpstreamClient
from recorder.store import EventStore, open_store
from recorder.store.sql import SqlStore
from recorder.telemetry.logs import SERVER, log_run
from recorder.telemetry.metrics import Metrics
from recorder.telemetry.observer import RunReport, TraceSink
from recorder.telemetry.observers import Telemetry
from recorder.timetravel.audit import apply_retention
from recorder.timetravel.history import History
from recorder.timetravel.indexing import Indexer
from recorder.timetravel.redact import redact_split

_LAST_INDEX = 5.0  # seconds a closing recorder gives the search index to catch up
_REDACT_TRIES = 10  # heartbeats a run's split-secret redaction is tried again after a failure


async def open_server_store(settings: Settings) -> EventStore:
    """The store a server runs on, as ``settings`` say: migrated, its chunk cache sized."""
    return await open_store(
        settings.db,
        migrate=True,
        chunk_cache_bytes=settings.chunk_cache_bytes,
        read_deadline=settings.read_deadline,
    )


class Runtime:
    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        client: UpstreamClient,
        journal: JournaledStore | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        # The proxy records through the journal (when it is on): it rides through outages.
        self.journal = journal
        self.client = client
        self.owner = new_owner()
        # Building checkpoints, like indexing, gives way to runs being recorded.
        self.history = History(
            store,
            checkpoint_every=settings.checkpoint_every,
            busy=lambda: bool(self.proxy.active),
        )
        self.metrics = Metrics() if settings.metrics else None
        if self.metrics is not None and isinstance(store, SqlStore):
            cache = store.chunk_cache  # (read when scraped, on whichever thread serves it)
            self.metrics.chunk_cache_bytes.set_function(lambda: cache.size)
        self.traces = trace_export(settings, store) if settings.otel_endpoint else None
        sinks: list[Callable[[RunReport], None]] = [log_run, self._closed]
        if self.traces is not None:
            sinks.append(self.traces)
        self.telemetry = Telemetry(self.metrics, sinks)
        if journal is not None:
            journal.observer = self.telemetry
        self.proxy = Proxy(journal or store, settings, client, self.owner, self.telemetry)
        self.indexer = Indexer(
            store,
            busy=lambda: bool(self.proxy.active),
            owner=self.owner,
            handover=settings.search_index_handover,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._to_checkpoint: asyncio.Queue[str] = asyncio.Queue()
        # Ended runs whose split secrets are still to be redacted (``_redact_split``).
        self._unredacted: set[str] = set()
        self._redact_tries: dict[str, int] = {}  # failures other than an outage, by run
        self._owns_store = False
        self._stopped = False
        self._stop_metrics: Callable[[], None] | None = None

    @classmethod
    async def start(cls, settings: Settings, store: EventStore | None = None) -> Runtime:
        owns = store is None
        if store is None:
            store = await open_server_store(settings)
        journal: JournaledStore | None = None
        try:
            if settings.journal:
                journal = await open_journaled(settings, store)
        except BaseException:
            if owns:
                await store.close()
            raise
        client = upstream_client(settings)
        runtime = cls(settings, store, client, journal)
        runtime._owns_store = owns
        try:
            if runtime.metrics is not None and settings.metrics_address:
                runtime._stop_metrics = runtime.metrics.serve(settings.metrics_address)
            await runtime.reap()
        except BaseException:
            await runtime.close()  # what it opened (the store too, when it opened it)
            raise
        runtime._tasks.append(asyncio.create_task(runtime._keep_alive(), name="heartbeat"))
        runtime._tasks.append(asyncio.create_task(runtime._checkpointing(), name="checkpoints"))
        if settings.retention is not None or settings.retention_agents:
            runtime._tasks.append(asyncio.create_task(runtime._retain(), name="retention"))
        if settings.search_index:
            follow = runtime.indexer.follow(settings.search_index_interval)
            runtime._tasks.append(asyncio.create_task(follow, name="search-index"))
        return runtime

    def _closed(self, report: RunReport) -> None:
        """A run ended: what its deltas hold together is redacted, and its checkpoints are
        built, behind it (``redact_split``, ``History.build_checkpoints``)."""
        if self.history.checkpoints or self.proxy.redactor is not None:
            self._to_checkpoint.put_nowait(report.end.run_id)

    async def checkpoints_built(self) -> None:
        """Wait until the runs ended so far have their checkpoints (and, with redaction
        rules, their split secrets redacted)."""
        await self._to_checkpoint.join()

    async def reap(self) -> list[str]:
        """Runs whose recorder stopped heartbeating (a crash) become ``incomplete``.

        This process's own runs are never reaped here: it closes them itself, whatever
        happens to their streams, and a long commit queue must not look like a crash.
        """
        stale = time.time() - 3 * self.settings.heartbeat_interval
        return await self.store.mark_incomplete(stale_before=stale, exclude_owner=self.owner)

    async def close(self) -> None:
        """Stop its work and close what it opened; once (a second call does nothing)."""
        if self._stopped:
            return
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.proxy.unclosed:  # a last try; else the next process marks them incomplete
            with contextlib.suppress(Exception):
                await self.proxy.close_left_open()
        await self.proxy.close()
        if self.proxy.redactor is not None and not self.journal_holds_writes:
            # The runs ended last are redacted before the stop, bounded as the index is.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._redact_ended(), _LAST_INDEX)
        if self.settings.search_index and not self.journal_holds_writes:
            # A last pass, bounded: the runs that closed just before the stop are found by
            # search at once, not when a recorder next runs on this database (none while
            # the database is out: the journal holds their ends).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.indexer.index_own(), _LAST_INDEX)
        if self.journal is not None:
            await self.journal.close()
        await self.client.close()
        if self.traces is not None:
            await self.traces.close()
        if self._stop_metrics is not None:
            await asyncio.to_thread(self._stop_metrics)
        if self._owns_store:
            await self.store.close()

    async def _redact_ended(self) -> None:
        while not self._to_checkpoint.empty():
            await self._redact_split(self._to_checkpoint.get_nowait())
            self._to_checkpoint.task_done()

    async def _checkpointing(self) -> None:
        # One run at a time, off every client's path. A failure costs only speed: a query
        # then folds from the nearest checkpoint there is.
        while True:
            run_id = await self._to_checkpoint.get()
            try:
                await self._redact_split(run_id)  # before the checkpoints folded over it
                if self.history.checkpoints:
                    with contextlib.suppress(Exception):
                        await self.history.build_checkpoints(run_id)
            finally:
                self._to_checkpoint.task_done()

    async def _redact_split(self, run_id: str) -> None:
        """With redaction rules, what the run's deltas hold together (``redact_split``).
        While the journal holds writes (the run's end may be in it, not in the database)
        and while the database is out, the run waits: the heartbeat tries it again once
        the database has everything (a few times after other store failures). A stop
        leaves the rest to ``recorder redact``."""
        redactor = self.proxy.redactor
        if redactor is None:
            return
        if self.journal_holds_writes:
            self._unredacted.add(run_id)
            return
        fields = {"run_id": run_id}
        try:
            await redact_split(self.store, run_id, redactor, actor="redaction")
        except RunNotFound:  # purged meanwhile: nothing left to redact
            pass
        except Exception as exc:
            # The database out waits for it; a run still open here (its close waits for the
            # database: ``Proxy.unclosed``) or a passing failure is tried a few times more.
            # Anything else is left to ``recorder redact``, never tried again and again.
            out = isinstance(exc, StoreUnavailable)
            tries = 0 if out else self._redact_tries.get(run_id, 0) + 1
            if (out or isinstance(exc, StoreError)) and tries <= _REDACT_TRIES:
                self._redact_tries[run_id] = tries
                self._unredacted.add(run_id)
                SERVER.warning("redacting split secrets postponed", extra={"fields": fields})
                return
            SERVER.exception("redacting split secrets failed", extra={"fields": fields})
        self._redact_tries.pop(run_id, None)
        self._unredacted.discard(run_id)

    @property
    def journal_holds_writes(self) -> bool:
        """Whether writes wait in the journal (the database out, or the journal draining):
        what reads the database then may miss what was recorded."""
        return self.journal is not None and self.journal.degraded

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            with contextlib.suppress(Exception):
                await self.store.heartbeat(list(self.proxy.active), self.owner)
                await self.reap()
                # While the journal holds writes, a run's end may be in it, not yet in the
                # database: close what an outage left open only once the journal drained.
                if self.proxy.unclosed and not self.journal_holds_writes:
                    await self.proxy.close_left_open()
                if self._unredacted and not self.journal_holds_writes:
                    for run_id in sorted(self._unredacted):
                        self._unredacted.discard(run_id)
                        self._to_checkpoint.put_nowait(run_id)

    async def _retain(self) -> None:
        """Purge what the retention settings say is too old: now, then every interval.
        Each pass that purged something is in the audit log (actor ``retention``), with a
        tombstone per purge, and in the server's log."""
        while True:
            try:
                results = await apply_retention(self.store, self.settings)
            except Exception:
                SERVER.exception("retention pass failed")
            else:
                purged = sum(len(result["threads"]) for result in results)
                if purged:
                    events = sum(result["events"] for result in results)
                    fields = {"threads": purged, "events": events}
                    SERVER.info("retention purged", extra={"fields": fields})
            await asyncio.sleep(self.settings.retention_interval)


def upstream_client(settings: Settings) -> UpstreamClient:
    """The client for agents: no overall deadline (a run may stream for hours), an idle
    timeout on every wait."""
    return UpstreamClient(
        connect_timeout=settings.connect_timeout, idle_timeout=settings.idle_timeout
    )


def trace_export(settings: Settings, store: EventStore) -> TraceSink:
    """The OpenTelemetry export of ended runs (the ``otel`` extra)."""
    try:
        # Imported here: the extra is optional, and a recorder without it must start.
        from recorder.telemetry.traces import TraceExport
    except ImportError as exc:
        raise ConfigError(
            "otel_endpoint is set but OpenTelemetry is not installed: "
            "pip install 'agui-recorder[otel]'"
        ) from exc

    async def run_input(run_id: str) -> bytes | None:
        return (await store.get_run(run_id)).input

    return TraceExport(
        settings.otel_endpoint or "",
        store.read_events,
        run_input,
        headers=settings.otel_headers,
        service_name=settings.otel_service_name,
        capture_content=settings.otel_capture_content,
    )
