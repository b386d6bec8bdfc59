"""PostgreSQL: a run's last events and its close in one round trip

``recorder_append_close`` does what ``recorder_append`` does, then closes runs of the call
in the same transaction, each as ``recorder.store.closing.set_status`` closes one (under
its thread's row lock: the run closed and sealed, the thread's chain and summary). A run
whose answer ended with its last batch so commits once where it took two commits (a WAL
flush each).

Every run it closes has events in the call, so ``recorder_append`` has locked its row and
checked that it was running before anything is closed; it takes the thread's row after
the run's, where other writers take the thread's first. No other writer waits on a live
run's row while holding its thread's: a run is closed by the process that records it (or
reaped once its writer stopped), and every append takes the events lock before any row.

A call sent again (its connection broke before the answer came) finds its first run
closed with the hash it brings for that run's last event (``p_ends``): it was committed,
closes and all; nothing is written again, and the position it took is answered.

Revision ID: 0010_append_close
Revises: 0009_events_fk
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_append_close"
down_revision: str | None = "0009_events_fk"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The length-prefixed UTF-8 of an id, as ``recorder.store.chain`` hashes it.
_ID = "int4send(octet_length(convert_to({0}, 'UTF8'))) || convert_to({0}, 'UTF8')"

APPEND_CLOSE = f"""
CREATE FUNCTION recorder_append_close(
    p_runs text[], p_counts integer[], p_firsts integer[], p_lasts bytea[],
    p_ends bytea[], p_now double precision,
    p_run_at integer[], p_seq integer[], p_at double precision[], p_origin text[],
    p_start integer[], p_types text[],
    p_blocks text, p_kinds text, p_lengths text, p_payloads bytea, p_hashes bytea,
    p_close text[], p_status text[], p_outcome text[], p_error text[], p_violations text[],
    p_summary text[], p_finished double precision, p_run_prefix bytea, p_thread_prefix bytea,
    OUT o_problem integer, OUT o_at integer, OUT o_status text, OUT o_position bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_run record;
    v_thread record;
    v_head bytea;
    v_seal integer;
    v_newly boolean;
    v_rename boolean;
BEGIN
    SELECT r.status, r.event_count INTO v_run FROM runs r WHERE r.run_id = p_runs[1];
    IF FOUND AND v_run.status <> 'running' AND p_counts[1] > 0
        AND v_run.event_count = p_firsts[1] + p_counts[1]
        AND p_ends[1] = (SELECT e.hash FROM events e WHERE e.run_id = p_runs[1]
                         AND e.seq = v_run.event_count - 1)
    THEN
        o_problem := 0;
        SELECT e.position - 1 INTO o_position FROM events e
            WHERE e.run_id = p_runs[1] AND e.seq = p_firsts[1];
        RETURN;
    END IF;
    SELECT a.o_problem, a.o_at, a.o_status, a.o_position
        INTO o_problem, o_at, o_status, o_position
        FROM recorder_append(p_runs, p_counts, p_firsts, p_lasts, p_ends, p_now, p_run_at,
                             p_seq, p_at, p_origin, p_start, p_types, p_blocks, p_kinds,
                             p_lengths, p_payloads, p_hashes) a;
    IF o_problem <> 0 OR o_at IS NOT NULL THEN
        RETURN;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_close, 1), 0) LOOP
        SELECT t.thread_id, t.head, t.sealed, t.summary = p_summary[i] AS same
            INTO v_thread FROM threads t
            WHERE t.thread_id = (SELECT r.thread_id FROM runs r WHERE r.run_id = p_close[i])
            FOR UPDATE;
        IF NOT FOUND THEN
            UPDATE runs SET status = p_status[i], finished_at = p_finished,
                outcome = coalesce(p_outcome[i], outcome), error = coalesce(p_error[i], error),
                violations = coalesce(p_violations[i], violations)
                WHERE run_id = p_close[i];
            CONTINUE;
        END IF;
        UPDATE runs SET status = p_status[i], finished_at = p_finished,
            outcome = coalesce(p_outcome[i], outcome), error = coalesce(p_error[i], error),
            violations = coalesce(p_violations[i], violations),
            head = coalesce(head, (SELECT e.hash FROM events e WHERE e.run_id = runs.run_id
                                   ORDER BY e.seq DESC LIMIT 1),
                            sha256(p_run_prefix || {_ID.format("v_thread.thread_id")}
                                   || {_ID.format("p_close[i]")})),
            seal = coalesce(seal, v_thread.sealed + 1)
            WHERE run_id = p_close[i] RETURNING head, seal INTO v_head, v_seal;
        v_newly := v_seal = v_thread.sealed + 1;
        v_rename := p_summary[i] IS NOT NULL AND v_thread.same IS NOT TRUE;
        IF v_newly OR v_rename THEN
            UPDATE threads SET
                head = CASE WHEN v_newly THEN sha256(coalesce(v_thread.head,
                           sha256(p_thread_prefix || {_ID.format("v_thread.thread_id")}))
                           || {_ID.format("p_close[i]")} || v_head) ELSE head END,
                sealed = CASE WHEN v_newly THEN v_thread.sealed + 1 ELSE sealed END,
                summary = CASE WHEN v_rename THEN p_summary[i] ELSE summary END
                WHERE thread_id = v_thread.thread_id;
        END IF;
    END LOOP;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(APPEND_CLOSE)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP FUNCTION IF EXISTS recorder_append_close")
