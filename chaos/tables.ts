import type pg from 'pg';

/**
 * The harness's own bookkeeping, next to the jobs table: which jobs were enqueued (written
 * in the enqueue's transaction, with the jobs each waits for), every handler execution (job, lease token, process), an
 * audit of every UPDATE of a job row (states, tokens, attempts before and after, and when the
 * statement that made it began), every invocation that took a slot under a cap, and every pause of
 * the paused queue (from when the pause was known committed to when its resume was sent); for the
 * stepped jobs, every execution of a step's function, the transactional steps' rows, every write of
 * a step row (a trigger), the signals sent and the payloads the jobs got.
 */
export async function createChaosTables(client: pg.Pool, schema: string): Promise<void> {
  const s = `"${schema}"`;
  await client.query(`
    -- The run's settings the checker needs: the driver, and the stepped kind's transactional steps.
    create table ${s}.chaos_run (driver text not null, transactional_steps text[] not null);
    -- Jobs the harness enqueued through the driver under test while faults were on (each recorded in
    -- chaos_enqueued in the enqueue's own transaction or batch), with the path and whether a blind
    -- retry with a dedupe key was allowed.
    create table ${s}.chaos_live_enqueues (
      correlation_id text primary key, path text not null, dedupe_key text, attempts int not null);
    -- Dead jobs the harness replayed through the driver under test (each once, however often sent).
    create table ${s}.chaos_replays (job_id bigint primary key, sends int not null);
    create table ${s}.chaos_enqueued (
      job_id bigint primary key, queue text not null, ordering_key text, concurrency_key text,
      parents bigint[], run_anyway boolean,
      -- Stepped jobs; a signalled one waits on signal_key, its signal sent early (before any worker
      -- runs) or late (once its wait is seen in job_steps).
      stepped boolean not null default false, signal_key text, signal_early boolean,
      -- Enqueued while the faults were on, through the driver under test (chaos_live_enqueues).
      live boolean not null default false);
    create table ${s}.chaos_pauses (
      id bigserial primary key, confirmed_at timestamptz not null, resume_sent_at timestamptz);
    create table ${s}.chaos_schedule_runs (occurrence text not null, job_id bigint not null);
    create table ${s}.chaos_executions (
      id bigserial primary key, job_id bigint not null, lease_token uuid not null,
      attempt int not null, pid int not null, at timestamptz not null default clock_timestamp());
    create index on ${s}.chaos_executions (job_id);
    create table ${s}.chaos_audit (
      id bigserial primary key, job_id bigint not null,
      old_state text not null, new_state text not null, old_token uuid, new_token uuid,
      old_attempt int not null, new_attempt int not null, at timestamptz not null default clock_timestamp(),
      -- The writing statement's start: a claim that began after a pause committed must have seen it.
      stmt_at timestamptz not null default statement_timestamp());
    create index on ${s}.chaos_audit (old_token);
    -- Every execution of a step's function, first thing (with the snapshot of the statement that
    -- recorded it: which step completions had committed when it started).
    create table ${s}.chaos_step_runs (
      id bigserial primary key, job_id bigint not null, step text not null, lease_token uuid not null,
      pid int not null, snap pg_snapshot not null default pg_current_snapshot(),
      at timestamptz not null default clock_timestamp());
    create index on ${s}.chaos_step_runs (job_id, step);
    -- The rows the transactional steps write, in their transactions (no unique key: a second row must show).
    create table ${s}.chaos_step_effects (
      id bigserial primary key, job_id bigint not null, step text not null, lease_token uuid not null,
      pid int not null, at timestamptz not null default clock_timestamp());
    create index on ${s}.chaos_step_effects (job_id, step);
    -- Every write of a step row, with the writing transaction's id (the row exists only if it committed).
    create table ${s}.chaos_step_history (
      id bigserial primary key, job_id bigint not null, name text not null, old_state text, new_state text not null,
      xid xid8 not null default pg_current_xact_id(), at timestamptz not null default clock_timestamp());
    create index on ${s}.chaos_step_history (job_id, name);
    create function ${s}.chaos_step_row() returns trigger language plpgsql as $$
    begin
      insert into ${s}.chaos_step_history (job_id, name, old_state, new_state)
      values (new.job_id, new.name, case when tg_op = 'UPDATE' then old.state end, new.state);
      return new;
    end $$;
    create trigger chaos_step_history after insert or update on ${s}.job_steps
      for each row execute function ${s}.chaos_step_row();
    -- Each signal the harness sent, written in the sender's transaction (sent ⇔ recorded; once per job).
    create table ${s}.chaos_signals (
      job_id bigint primary key, key text not null unique, payload jsonb not null, early boolean not null,
      sent_at timestamptz not null default clock_timestamp());
    -- The payload each run of a signalled job got from its wait, just before it returned.
    create table ${s}.chaos_signal_results (
      job_id bigint not null, lease_token uuid not null, payload jsonb, at timestamptz not null default clock_timestamp());
    create function ${s}.chaos_audit_row() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' then
        -- A completion that deleted the row (completedJobs 'delete'), made under the row's token.
        insert into ${s}.chaos_audit (job_id, old_state, new_state, old_token, new_token, old_attempt, new_attempt)
        values (old.id, old.state, 'deleted', old.lease_token, old.lease_token, old.attempt, old.attempt);
        return old;
      end if;
      insert into ${s}.chaos_audit (job_id, old_state, new_state, old_token, new_token, old_attempt, new_attempt)
      values (old.id, old.state, new.state, old.lease_token, new.lease_token, old.attempt, new.attempt);
      return new;
    end $$;
    create trigger chaos_audit after update or delete on ${s}.jobs for each row execute function ${s}.chaos_audit_row();
    -- Every slot taken by an invocation (runs with a cap): which invocations the starts really ran.
    create table ${s}.chaos_registrations (invocation_id text not null, at timestamptz not null default clock_timestamp());
    create function ${s}.chaos_register_row() returns trigger language plpgsql as $$
    begin
      insert into ${s}.chaos_registrations (invocation_id) values (new.invocation_id);
      return new;
    end $$;
    create trigger chaos_register after insert or update on ${s}.invocations
      for each row execute function ${s}.chaos_register_row();
  `);
}
