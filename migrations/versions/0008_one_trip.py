"""PostgreSQL: a run created, and a batch of events appended, in one round trip

Two functions, called outside any transaction of the store's making (the call is its own
transaction): ``recorder_create_run`` and ``recorder_append``. Each does what the store's
statements did one round trip at a time (``recorder.store.writes``), in the same order and
under the same locks, each statement on a fresh snapshot (READ COMMITTED, as before). A
call that meets what only the statements handle (a delta whose base is gone, a run whose
last event the caller does not know) writes nothing and says so; the store then takes the
statements' way. SQLite gains nothing from them: its statements cost no round trips.

Revision ID: 0008_one_trip
Revises: 0007_turns
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008_one_trip"
down_revision: str | None = "0007_turns"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (status, created, parent, inferred): status 0 done, 1 the thread exists and a new one
# was asked for, 2 the delta's base is gone; in both of the latter nothing was written.
# The thread's row is locked before the base is looked for (a purge that took the base
# committed before, or waits for this call), and before the run's row is inserted.
# A call sent again (its connection broke before the answer came) finds its own run, the
# one with its owner, creation time and heartbeat, and changes nothing; a run of another
# writer's with the id is a unique violation, as before.
CREATE_RUN = """
CREATE FUNCTION recorder_create_run(
    p_run text, p_thread text, p_agent text, p_status text,
    p_parent text, p_parent_seq integer, p_inferred boolean, p_infer boolean,
    p_origin text, p_now double precision, p_beat double precision, p_owner text,
    p_source_run text, p_source_seq integer, p_new_thread boolean,
    p_input bytea, p_delta bytea, p_base text, p_base_created double precision,
    OUT o_status integer, OUT o_created boolean, OUT o_parent text, OUT o_inferred boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_count integer;
BEGIN
    o_status := 0;
    SELECT false, r.parent_run_id, r.parent_inferred INTO o_created, o_parent, o_inferred
        FROM runs r WHERE r.run_id = p_run AND r.thread_id = p_thread
        AND r.owner IS NOT DISTINCT FROM p_owner AND r.created_at = p_now
        AND r.heartbeat_at = p_beat;
    IF FOUND THEN
        RETURN;
    END IF;
    o_parent := p_parent;
    o_inferred := p_inferred;
    IF p_new_thread THEN
        INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count,
                             latest_run_id, source_run_id, source_seq)
            VALUES (p_thread, p_agent, p_now, p_now, 1, p_run, p_source_run, p_source_seq)
            ON CONFLICT (thread_id) DO NOTHING;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        o_created := v_count = 1;
        IF NOT o_created THEN
            o_status := 1;
            RETURN;
        END IF;
    ELSE
        IF p_delta IS NOT NULL THEN
            PERFORM 1 FROM threads WHERE thread_id = p_thread FOR UPDATE;
            PERFORM 1 FROM run_inputs b JOIN runs r ON r.run_id = b.run_id
                WHERE b.run_id = p_base AND r.thread_id = p_thread
                AND r.created_at = p_base_created;
            IF NOT FOUND THEN
                o_status := 2;
                RETURN;
            END IF;
        END IF;
        IF p_infer AND p_parent IS NULL THEN
            -- The thread's latest run, read under its row's lock, then claimed; a thread
            -- not there yet is inserted claimed (one that appeared meanwhile is locked).
            SELECT latest_run_id INTO o_parent FROM threads
                WHERE thread_id = p_thread FOR UPDATE;
            o_created := NOT FOUND;
            IF o_created THEN
                INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count,
                                     latest_run_id)
                    VALUES (p_thread, p_agent, p_now, p_now, 1, p_run)
                    ON CONFLICT (thread_id) DO NOTHING;
                GET DIAGNOSTICS v_count = ROW_COUNT;
                o_created := v_count = 1;
                IF NOT o_created THEN
                    SELECT latest_run_id INTO o_parent FROM threads
                        WHERE thread_id = p_thread FOR UPDATE;
                END IF;
            END IF;
            IF NOT o_created THEN
                UPDATE threads SET updated_at = p_now, run_count = run_count + 1,
                    latest_run_id = p_run WHERE thread_id = p_thread;
            END IF;
            o_inferred := o_parent IS NOT NULL;
        ELSE
            INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count,
                                 latest_run_id, source_run_id, source_seq)
                VALUES (p_thread, p_agent, p_now, p_now, 1, p_run, p_source_run, p_source_seq)
                ON CONFLICT (thread_id) DO UPDATE SET updated_at = excluded.updated_at,
                    run_count = threads.run_count + 1, latest_run_id = excluded.latest_run_id
                RETURNING run_count INTO v_count;
            o_created := v_count = 1;
        END IF;
    END IF;
    INSERT INTO runs (run_id, thread_id, agent, status, parent_run_id, parent_seq,
                      parent_inferred, origin, created_at, heartbeat_at, owner)
        VALUES (p_run, p_thread, p_agent, p_status, o_parent, p_parent_seq, o_inferred,
                p_origin, p_now, p_beat, p_owner);
    IF p_delta IS NOT NULL THEN
        INSERT INTO run_inputs (run_id, input, base) VALUES (p_run, p_delta, p_base);
    ELSIF p_input IS NOT NULL THEN
        INSERT INTO run_inputs (run_id, input) VALUES (p_run, p_input);
    END IF;
END $$
"""

# (problem, at, status, position): problem 0 done (``position``: the one
# before the first new event's), 1 run ``at`` (1-based) is unknown, 2 it is not running
# (``status``), 3 its events are not where the caller thought (another writer, a rewrite):
# nothing was written. Under the events lock (taken first: positions increase in commit
# order), each run's row is locked, in the order given, and checked before anything is
# written: its count of events and its last event's hash, as the caller expects them.
# Events come in blocks: consecutive events of one run (``p_run_at``, an index into
# ``p_runs``) from seq ``p_seq`` that share recorded_at and origin, the block's first
# event being the ``p_start``-th of the call's. The events themselves come as a few
# values, not arrays of one element each (a driver encodes those element by element):
# ``p_payloads`` and ``p_hashes`` (32 bytes each) joined, and as comma-separated numbers
# each event's block (``p_blocks``), type (``p_kinds``: an index into ``p_types``, 0 for
# none) and payload's length (``p_lengths``).
# A call sent again (its connection broke before the answer came) finds its first run
# already ending with the hash it brings for that run's last event (``p_ends``): it was
# committed, whole; nothing is written again, and the position it took is answered.
APPEND = """
CREATE FUNCTION recorder_append(
    p_runs text[], p_counts integer[], p_firsts integer[], p_lasts bytea[],
    p_ends bytea[], p_now double precision,
    p_run_at integer[], p_seq integer[], p_at double precision[], p_origin text[],
    p_start integer[], p_types text[],
    p_blocks text, p_kinds text, p_lengths text, p_payloads bytea, p_hashes bytea,
    OUT o_problem integer, OUT o_at integer, OUT o_status text, OUT o_position bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_threads text[] := '{}';
    v_row record;
BEGIN
    LOCK TABLE events IN EXCLUSIVE MODE;
    o_problem := 0;
    FOR i IN 1 .. coalesce(array_length(p_runs, 1), 0) LOOP
        SELECT r.thread_id, r.status, r.event_count INTO v_row FROM runs r
            WHERE r.run_id = p_runs[i] FOR UPDATE;
        o_at := i;
        IF NOT FOUND THEN
            o_problem := 1;
            RETURN;
        END IF;
        IF v_row.status <> 'running' THEN
            o_problem := 2;
            o_status := v_row.status;
            RETURN;
        END IF;
        IF i = 1 AND p_counts[1] > 0 AND v_row.event_count = p_firsts[1] + p_counts[1]
            AND p_ends[1] = (SELECT e.hash FROM events e WHERE e.run_id = p_runs[1]
                             AND e.seq = v_row.event_count - 1)
        THEN
            SELECT e.position - 1 INTO o_position FROM events e
                WHERE e.run_id = p_runs[1] AND e.seq = p_firsts[1];
            o_at := NULL;
            RETURN;
        END IF;
        IF v_row.event_count <> p_firsts[i] OR (p_firsts[i] > 0 AND p_lasts[i] IS DISTINCT FROM
            (SELECT e.hash FROM events e WHERE e.run_id = p_runs[i] AND e.seq = p_firsts[i] - 1))
        THEN
            o_problem := 3;
            RETURN;
        END IF;
        v_threads[i] := v_row.thread_id;
    END LOOP;
    o_at := NULL;
    FOR i IN 1 .. coalesce(array_length(p_runs, 1), 0) LOOP
        UPDATE runs SET event_count = event_count + p_counts[i], heartbeat_at = p_now
            WHERE run_id = p_runs[i];
    END LOOP;
    SELECT coalesce(max(e.position), 0) INTO o_position FROM events e;
    INSERT INTO events (position, thread_id, run_id, seq, type, payload, recorded_at,
                        origin, hash)
        SELECT o_position + e.n, r.thread_id, r.run_id, b.seq + (e.n - b.start)::integer,
               p_types[e.kind], substring(p_payloads FROM e.first_byte FOR e.length), b.at,
               b.origin, substring(p_hashes FROM (e.n - 1)::integer * 32 + 1 FOR 32)
        FROM (SELECT u.*, (sum(u.length) OVER (ORDER BY u.n) - u.length + 1)::integer AS first_byte
              FROM unnest(string_to_array(p_blocks, ',')::integer[],
                          string_to_array(p_kinds, ',')::integer[],
                          string_to_array(p_lengths, ',')::integer[]) WITH ORDINALITY
                   AS u(block, kind, length, n)) e
        JOIN unnest(p_run_at, p_seq, p_at, p_origin, p_start) WITH ORDINALITY
                AS b(run_at, seq, at, origin, start, k) ON b.k = e.block
        JOIN unnest(p_runs, v_threads) WITH ORDINALITY AS r(run_id, thread_id, j)
                ON r.j = b.run_at;
    PERFORM pg_notify('recorder_events', '');
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(CREATE_RUN)
    op.execute(APPEND)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP FUNCTION IF EXISTS recorder_append")
    op.execute("DROP FUNCTION IF EXISTS recorder_create_run")
