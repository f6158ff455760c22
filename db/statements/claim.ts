import { randomUUID } from 'node:crypto';
import { type SQL, sql } from 'drizzle-orm';
import type { BreakerMove, Completion, Outcome, SettleReport } from '../../base/outcomes.js';
import type { ClaimedJob } from '../../base/rows.js';
import { queryHotRows, sqlStateOf } from '../execute.js';
import type { Executor } from '../executor.js';
import { cachedClaimStatement } from './claim-cache.js';
import {
  appendCapped,
  epochMs,
  holdsKey,
  jobsRef,
  lapsedLeases,
  lapsedWindow,
  leaseRanOut,
  nowExpr,
} from './common.js';
import { claimProbeCtes, hasDestinations, movesJson, toMoves } from './destinations.js';
import {
  claimShapeCte,
  type DeclaredLimit,
  destinationOpen,
  effectiveLimitsCte,
  heldCte,
  keyedCtes,
  notHeld,
  withinLimitsCtes,
} from './limits.js';
import { notPaused, pausedNames } from './pauses.js';
import {
  type DeclaredRateLimit,
  effectiveRateLimitsCte,
  noRateHeldCte,
  rateHeldCte,
  recordRateStartsCte,
} from './rate-limits.js';
import {
  addReportTuples,
  type SettleParams,
  type SettleReportTuple,
  settleCtes,
  settleOutcomes,
  settleReportJson,
} from './settle.js';
import { closedWindowsCte, type DeclaredWindow, inWindow } from './windows.js';

export interface ClaimRequest {
  /** Kinds this claimer may take, each with the lease it gets (its timeout plus a grace). */
  leases: readonly { kind: string; leaseMs: number }[];
  /** Only these queues; all queues when absent. */
  queues?: readonly string[];
  limit: number;
  /** Recorded as locked_by: which invocation holds the lease. */
  invocationId: string;
  /**
   * The lease token the claimed jobs get, chosen by the caller so that it can give them back
   * (releaseClaim) when the claim's answer is lost. @defaultValue a random UUID
   */
  leaseToken?: string;
  /** Test hook: the database's "now" for this statement. */
  now?: Date;
  /**
   * Outcomes of the previous batch, written in the same statement before claiming the next
   * (one round trip per batch in steady state). They are fenced exactly as settleJobs.
   */
  settle?: readonly Outcome[];
  /** What a completion in `settle` does to the row. @defaultValue 'keep' */
  completion?: Completion;
  /**
   * Claim from this lane first (0 to CLAIM_LANES - 1), then from the head when the lane has fewer
   * than `limit` ready jobs. Absent: from the head, in strict claim order.
   */
  lane?: number;
  /**
   * Use `lane` only while more than `moreThan` invocations of `worker` are registered, counted by
   * this statement (its snapshot sees the registrations committed when it starts, so siblings that
   * registered a moment ago count — the invocation's own memory of them would not).
   */
  laneWhen?: { worker: string; moreThan: number };
  /**
   * Concurrency limits the code declares for this claimer's queues and kinds; the limits table
   * overrides them and adds its own. @defaultValue none
   */
  limits?: readonly DeclaredLimit[];
  /**
   * Rate limits the code declares for this claimer's queues, kinds and destinations; the rate_limits
   * table overrides them and adds its own. @defaultValue none
   */
  rateLimits?: readonly DeclaredRateLimit[];
  /**
   * Run windows the code declares for kinds and queues: outside its window a job is neither
   * claimed nor rescued. @defaultValue none
   */
  windows?: readonly DeclaredWindow[];
  /** Test hook: the hash at which the walk over concurrency keys starts. @defaultValue random */
  keyStart?: number;
  /**
   * Send the limited claim first (what the last claim's `limited` said). A plain claim that finds a limit
   * or a keyed job claims nothing and the limited claim follows at once, so this only saves that
   * round trip. @defaultValue false (true when `limits` or `rateLimits` declares any)
   */
  limited?: boolean;
  /**
   * Send the ordered claim first (what the last claim's `ordered` said): jobs with an ordering key
   * wait for their turn there, and the plain claim leaves them out. @defaultValue false
   */
  ordered?: boolean;
  /** Send the rated claim first (what the last claim's `rated` said). @defaultValue false (true when `rateLimits` declares any) */
  rated?: boolean;
}

/**
 * Lanes split the queued jobs into CLAIM_LANES interleaved runs of LANE_RUN consecutive ids
 * (jobs_claim_lane_idx orders each lane as jobs_claim_idx orders the whole queue). Independent
 * claimers that all start at the head each walk past every row the others hold or just took
 * (SKIP LOCKED skips them one by one: 78 index entries per claimed job at 32 claimers against 4
 * at one), so invocations that are many claim from different lanes. Runs of 64 keep a claim's rows
 * on few heap pages. The expression is the index's: change both together (a migration).
 */
export const CLAIM_LANES = 16;
export const LANE_RUN = 64;
/** Concurrency keys one claim visits at most (twice its batch, up to this). */
const MAX_KEYS_WALKED = 500;

const randomInt32 = () => Math.floor(Math.random() * 2 ** 32) - 2 ** 31;

export interface ClaimResult {
  jobs: ClaimedJob[];
  /** What became of `request.settle`. */
  settled: SettleReport;
  /** Breakers the settled outcomes moved (closed → open, half_open → closed or open). */
  moves: BreakerMove[];
  /** Jobs this claim took as the half-open probe of their destination's breaker. */
  probes: { destination: string; jobId: string }[];
  /** Whether the next claim needs the limited claim (a limit applies, or keyed jobs wait): pass it as `limited`. */
  limited: boolean;
  /** Whether it needs at least the ordered claim (jobs with an ordering key exist): pass it as `ordered`. */
  ordered: boolean;
  /** Whether it needs the rated claim (a rate limit applies): pass it as `rated`. */
  rated: boolean;
  /**
   * Whether `settle` ended a job that others wait for: its children, released as the statement
   * ended, are not in this claim, so look again.
   */
  endedParents: boolean;
  /**
   * When a rate limit that held work back has room again (the earliest, on the database clock), or
   * null when no rate held anything back.
   */
  nextStartAt: Date | null;
  /** The same, as milliseconds from the claim's clock (the worker waits this long: no clock skew). */
  nextStartInMs: number | null;
}

type ClaimedColumns = [
  ids: string,
  payloads: unknown[],
  /** priority, attempt and max_attempts of each job, one after the other. */
  numbers: number[],
  kind: string,
  /** Each job's kind, or null when all have `kind`. */
  kinds: string[] | null,
  queue: string,
  queues: string[] | null,
  /** The jobs with any optional field set, in claim order. */
  optional:
    | [
        id: string,
        correlationId: string | null,
        orderingKey: string | null,
        destination: string | null,
        progress: unknown,
        traceContext: Record<string, string> | null,
      ][]
    | null,
];

/** The claim's one row: the claimed jobs and the settle report, each as JSON. */
type ClaimRow = {
  /** The claimed jobs column-wise, in claim order (see the statement); null when it claimed none. */
  jobs: ClaimedColumns | null;
  report: SettleReportTuple[] | null;
  /** Jobs with an ordering key are unfinished. */
  ordered: boolean;
  /** A limit applies to this claimer, or a job with a concurrency key waits. */
  limited: boolean;
  /** A rate limit applies to this claimer. */
  rated: boolean;
  ended_parents: boolean;
  moves: Parameters<typeof toMoves>[0];
  probes: [destination: string, jobId: string][] | null;
  next_start_ms: number | null;
  next_start_in_ms: number | null;
};

/**
 * Claims up to `limit` jobs in ONE statement (JobClaimMany), and writes the outcomes of the
 * previous batch in the same statement when given.
 *
 * Candidates come from SKIP LOCKED subqueries — runnable queued rows in claim order (a lane's
 * first, when given), and running rows whose lease expired with attempts left (rescue) — each with
 * its own LIMIT, which is the fence that stops the planner from locking more rows than we take.
 * The predicates are re-checked on each row's latest version when it is locked, so every picked
 * row runs: the claim's lease token, a lease on the database clock, one more attempt. Rows past
 * their deadline and rescues with no attempts left are never picked; buryDoomed() moves them to
 * the DLQ (the worker runs it at the start of every invocation).
 *
 * Four shapes. The plain claim is the above, for jobs without an ordering key. The ordered claim
 * (JobClaimOrdered) is the same plus each keyed job's turn, taken while any job with an ordering key
 * is unfinished. The limited claim (JobClaimLimited) is taken when a
 * concurrency limit applies to the claimer's queues or kinds, jobs with a concurrency key wait, or a
 * breaker holds a destination back: keyed jobs come from a walk over their keys (fair share, see
 * keyedCtes), and claim_room decides race-free which candidates fit their limits. The rated
 * claim adds rate limits (rate_room decides, record_rate_starts writes the starts taken). Each shape
 * checks whether a richer one is needed, and when it is, claims nothing (its settle still writes;
 * no breaker's half-open turn is handed out) and that one follows at once; the limited claim costs about 3 ms more to plan than the plain one and
 * the rated about 2 ms more again, which a claim that needs neither never pays.
 *
 * One lease token per claim, not per job: the token fences a holder, and a job claimed again
 * is claimed by another statement, so it gets another token. The worker sends the token once
 * per batch instead of once per job.
 */
export async function claimJobs(db: Executor, schema: string, request: ClaimRequest): Promise<ClaimResult> {
  const settle = request.settle ?? [];
  if (request.limit < 1 || request.leases.length === 0) {
    const settled = await settleOutcomes(db, schema, settle, request.now, request.completion);
    const { limited = false, rated = false, ordered = false } = request;
    const none = { nextStartAt: null, nextStartInMs: null, endedParents: false };
    return { jobs: [], settled, limited, rated, ordered, moves: settled.moves ?? [], probes: [], ...none };
  }
  const lane = request.lane;
  if (lane !== undefined && !(Number.isInteger(lane) && lane >= 0 && lane < CLAIM_LANES)) {
    throw new RangeError(`lane must be an integer from 0 to ${CLAIM_LANES - 1}`);
  }
  const declaresRates = (request.rateLimits?.length ?? 0) > 0;
  const declares = (request.limits?.length ?? 0) > 0 || declaresRates;
  const shapeOf = (hint: { rated?: boolean; limited?: boolean; ordered?: boolean }): Shape =>
    hint.rated || declaresRates ? 'rated' : hint.limited || declares ? 'limited' : hint.ordered ? 'ordered' : 'plain';
  const shape = shapeOf(request);
  const first = await runClaim(db, schema, request, shape);
  const needed = shapeOf(first);
  const result = {
    ...first,
    limited: RICHNESS[needed] >= RICHNESS.limited,
    rated: needed === 'rated',
    ordered: first.ordered || RICHNESS[needed] >= RICHNESS.limited,
  };
  if (RICHNESS[needed] <= RICHNESS[shape]) return result;
  // This shape found what only a richer one handles and claimed nothing; its settle is written.
  const second = await runClaim(db, schema, { ...request, settle: [] }, needed);
  return {
    ...second,
    limited: RICHNESS[needed] >= RICHNESS.limited || second.limited,
    ordered: true,
    rated: second.rated || needed === 'rated',
    settled: first.settled,
    moves: first.moves,
    endedParents: first.endedParents,
  };
}

export type ClaimShape = 'plain' | 'ordered' | 'limited' | 'rated';
type Shape = ClaimShape;
const RICHNESS: Record<Shape, number> = { plain: 0, ordered: 1, limited: 2, rated: 3 };

async function runClaim(db: Executor, schema: string, request: ClaimRequest, shape: Shape): Promise<ClaimResult> {
  // A shape that finds it needs a richer one claims nothing, so its follower may use the same token.
  const leaseToken = request.leaseToken ?? randomUUID();
  const statement =
    cachedClaimStatement(schema, request, shape, leaseToken, claimStatement) ??
    claimStatement(schema, request, shape, leaseToken);
  // The plain claim walks an index under LIMIT: its plan's cost does not grow with the backlog.
  const hint = { cheap: shape === 'plain' };
  // Two heads of one ordering key can both be ready when their enqueues raced (neither saw the
  // other); the unique index on running rows then refuses the second claim's update. A settle can
  // deadlock (40P01) with another claim that is rescuing one of its rows, whose lease lapsed while
  // its holder still ran it. Either way the whole statement rolled back (its settle too): run it
  // once more, with a snapshot that sees the other's commit.
  let rows: ClaimRow[];
  try {
    rows = await queryHotRows<ClaimRow>(db, statement, schema, hint);
  } catch (err) {
    const state = sqlStateOf(err);
    if (state !== '23505' && state !== '40P01') throw err;
    rows = await queryHotRows<ClaimRow>(db, statement, schema, hint);
  }
  const row = rows[0] ?? {
    jobs: null,
    report: null,
    limited: false,
    ordered: false,
    rated: false,
    ended_parents: false,
    moves: null,
    probes: null,
    next_start_ms: null,
    next_start_in_ms: null,
  };
  const result: ClaimResult = {
    jobs: [],
    settled: { lost: new Set(), changed: new Map() },
    limited: row.limited,
    ordered: row.ordered,
    rated: row.rated,
    endedParents: row.ended_parents,
    moves: toMoves(row.moves),
    probes: (row.probes ?? []).map(([destination, jobId]) => ({ destination, jobId })),
    nextStartAt: row.next_start_ms === null ? null : new Date(Number(row.next_start_ms)),
    nextStartInMs: row.next_start_in_ms === null ? null : Math.max(0, Number(row.next_start_in_ms)),
  };
  result.settled.moves = result.moves;
  addReportTuples(result.settled, row.report);
  if (row.jobs !== null) addClaimedJobs(result.jobs, row.jobs, leaseToken);
  return result;
}

/** Builds the jobs from the claim's columns; every job gets the same fields in the same order. */
function addClaimedJobs(jobs: ClaimedJob[], columns: ClaimedColumns, leaseToken: string): void {
  const [idText, payloads, numbers, kind, kinds, queue, queues, optional] = columns;
  const ids = idText.split(',');
  let o = 0;
  let next = optional?.[0];
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as string;
    const job: ClaimedJob = {
      id,
      kind: kinds === null ? kind : (kinds[i] as string),
      queue: queues === null ? queue : (queues[i] as string),
      payload: payloads[i],
      priority: numbers[3 * i] as number,
      attempt: numbers[3 * i + 1] as number,
      maxAttempts: numbers[3 * i + 2] as number,
      leaseToken,
      correlationId: null,
    };
    if (next !== undefined && next[0] === id) {
      job.correlationId = next[1];
      // Set only when present, as before.
      if (next[2] != null) job.orderingKey = next[2];
      if (next[3] != null) job.destination = next[3];
      if (next[4] != null) job.progress = next[4];
      if (next[5] != null) job.traceContext = next[5];
      next = optional?.[++o];
    }
    jobs.push(job);
  }
}

/**
 * The claim statement of one shape for a request (exported for scripts/claim-shapes.ts, which renders
 * them). `settleParams`: placeholders for the settle's parameters (claim-cache.ts renders it so).
 */
export function claimStatement(
  schema: string,
  request: ClaimRequest,
  shape: Shape,
  leaseToken: string,
  settleParams?: SettleParams,
): SQL {
  const limiting = shape === 'limited' || shape === 'rated';
  const rated = shape === 'rated';
  const settle = request.settle ?? [];
  const limit = request.limit;
  const jobs = jobsRef(schema);
  const kinds = request.leases.map((l) => l.kind);
  const rescueError = sql`jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock))`;
  const leaseMs = request.leases.map((l) => Math.max(1, Math.round(l.leaseMs)));
  const queueFilter = request.queues ? sql`and j.queue = any(${sql.param(request.queues)}::text[])` : sql``;
  // Every claim carries its settle, empty when no outcome rides along (an invocation's first claim):
  // one text for the first claim and the steady state, so a new connection plans one claim, not two
  // (~4-5 ms of server CPU each). An empty settle reads no row and writes none.
  // A row this statement settles must not also be rescued by it (one row, one write).
  const notSettling = sql`and j.id not in (select id from settle_input)`;
  // The outcomes are written before the claim locks anything. A locking scan that meets a row
  // another claim just updated locks its newest version before re-checking it (and keeps that
  // lock to the end of its statement), so it can hold one of OUR running rows; if our settle
  // waited on it while our own scan held one of ITS rows, the two statements would deadlock
  // (seen at 16 concurrent invocations). Settling first, a statement only ever waits while it
  // holds no such lock, and a claim never waits (SKIP LOCKED): no cycle. (claim_room's advisory
  // locks are taken after the settle too, in one global order.)
  // The limits' estimates leave out the running rows this statement ends.
  const notEnding = sql`and r.id not in (select id from settle_input)`;
  const settleDone = sql`(select n from settle_done) >= 0`;
  const afterSettle = sql`and ${settleDone}`;
  const now = sql`(select now from clock)`;
  // A job with an ordering key runs only while no other job of its key runs and no earlier one
  // holds the key: waits to run (a retrying head blocks its key) or, dead, holds it. Parked
  // followers (run_at = infinity) are waiting for this very job and do not count.
  // Two probes, each on its own index: the running one (jobs_ordering_running_uq) and the earlier
  // holder (jobs_ordering_blockers_idx, a key's few holders, never its parked backlog).
  // The plain claim leaves jobs with an ordering key to the ordered claim: the two probes below cost
  // every claim ~0.5 ms of planning (a claim is planned each time it is sent), whether or not any
  // job has a key (bench/history.md, "Where the lead went").
  const inTurn =
    shape === 'plain'
      ? sql`j.ordering_key is null`
      : sql`(j.ordering_key is null or (
    not exists (
      select 1 from ${jobs} o
      where o.ordering_key = j.ordering_key and o.state = 'running' and o.id <> j.id)
    and not exists (
      select 1 from ${jobs} o
      where o.ordering_key = j.ordering_key and o.id < j.id and ${holdsKey('o')})))`;
  const plainOrOrdered = shape === 'plain' || shape === 'ordered';
  const mine = sql`j.kind = any(${sql.param(kinds)}::text[]) ${queueFilter}`;
  const notPastDeadline = sql`(j.deadline is null or j.deadline > ${now})`;
  // Paused queues and kinds are never claimed, rescues included (a rescue starts an attempt). The
  // limited claim also leaves out the queues and kinds a limit fills — not for rescues, which start
  // no new job.
  const windowed = (request.windows?.length ?? 0) > 0;
  const open = windowed ? sql`and ${inWindow()}` : sql``;
  // A child runs only when this statement's snapshot sees each of its parents done (jobs_dependents
  // releases it then, or a moment early when two parents end at once: this has the last word).
  const parentsDone = sql`(j.after is null or not exists (
    select 1 from ${jobs} p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled')))))`;
  const runnable = sql`j.state = 'queued' and j.run_at <= ${now} and ${notPastDeadline} and ${mine}
    and ${limiting ? notHeld() : notPaused(schema)} and ${inTurn} ${open} and ${parentsDone} ${afterSettle}`;
  const lane = request.lane;
  const laneExpr = sql.raw(`((j.id / ${LANE_RUN}) % ${CLAIM_LANES})`);
  // The lane's rows in claim order (jobs_claim_lane_idx); the head fills what the lane lacks, and
  // is read only then (the union below stops pulling once it has `limit` rows).
  const when = request.laneWhen;
  // A one-time condition (an InitPlan): when it is false, the lane yields nothing and the head serves.
  const laneOn =
    when === undefined
      ? sql``
      : sql`and (select count(*) from ${sql.identifier(schema)}.invocations i
          where i.worker = ${when.worker} and i.expires_at > ${now}) > ${when.moreThan}`;
  const laneCte =
    lane === undefined
      ? sql``
      : sql`in_lane as (
      select j.id from ${jobs} j
      where ${laneExpr} = ${lane}::bigint and ${runnable} and j.concurrency_key is null ${laneOn}
      order by ${laneExpr}, j.priority, j.run_at, j.id
      limit ${limit}
      for update skip locked
    ),`;
  const fromLane = lane === undefined ? sql`` : sql`select id from in_lane union all `;
  // The head meets the lane's rows too, and locks them again (they are ours): not twice.
  const notInLane = lane === undefined ? sql`` : sql`and j.id not in (select id from in_lane)`;
  // The limited claim takes nothing when a rate applies: the rated claim follows at once. The
  // condition is part of `within`, which everything the claim writes besides its settle reads — the
  // rows it takes and the half-open turns claim_probes hands out before the update. A turn given to a
  // claim that then took nothing kept its destination blocked until the turn ran out, and each fresh
  // worker's first claim (the limited one, when its code declares a limit) took it again.
  const deferrable = shape === 'limited' ? sql`not (select f.rated from shape f)` : undefined;
  const limitCtes = plainOrOrdered
    ? sql``
    : sql`${keyedCtes(schema, {
        limit,
        maxKeys: Math.min(2 * limit, MAX_KEYS_WALKED),
        start: request.keyStart ?? randomInt32(),
        runnable,
        notEnding,
        now,
        rated,
        gate: settleDone,
      })},
    cands as (
      ${lane === undefined ? sql`` : sql`select id, 1 as src from in_lane union all`}
      select id, 2 as src from ready union all select id, 2 from keyed
    ),
    ${withinLimitsCtes(schema, {
      limit,
      gate: settleDone,
      now,
      rated,
      ...(deferrable ? { takes: deferrable } : {}),
    })},
    ${claimProbeCtes(schema, {
      leaseOf: (kind) => sql`(${sql.param(leaseMs)}::int[])[array_position(${sql.param(kinds)}::text[], ${kind})]`,
      now,
    })},`;
  // Rescues first (a backlog must not starve them), then the lane, then the head. The plain claim
  // takes nothing when the limited claim is needed, the limited claim nothing when the rated one is (a
  // one-time condition: nothing below it runs).
  // The picked ids as one array (an InitPlan), so the update reads each row by primary key. Joined
  // instead, the planner hashed the whole jobs table to find the batch: a sequential scan of every
  // row on every claim (8.5 of 16.5 ms per 500-job claim on a 20,000-row table).
  // The limited claim's condition is within's own (see deferrable): `within` is exactly what the
  // update takes, less the probe picks that lost their turn.
  const picked = plainOrOrdered
    ? sql`j.id = any(array(select id from expired union all ${fromLane}select id from ready limit ${limit}))
        and not (select f.needed from shape f) ${shape === 'plain' ? sql`and not (select f.ordered from shape f)` : sql``}`
    : sql`j.id = any(array(select c.id from within c
          where c.id not in (select p.id from probe_pick p) or c.id in (select w.job_id from probe_won w)))`;
  // expired: rescue, a lease that ran out (its holder died or overran) with attempts left. The
  // candidates come from lapsed_leases, read back by primary key (see the function: a bitmap scan of
  // jobs_lease_idx there re-read every dead entry on every claim until VACUUM).
  // claimed: the row is locked and the predicates above were re-checked on its latest version, so
  // every row there runs: the claim's token, a lease from the database clock, one more attempt.
  // The answer: one row with JSON arrays. The driver parses each with one JSON.parse instead of a
  // dozen fields per job (parsing rows field by field was the largest share of Node's time per job).
  // The jobs go column-wise, not as a tuple per job: the ids as one text, the payloads as one array,
  // the three numbers as one flat array, kind and queue once unless they differ, and the optional
  // fields only for the jobs that have any (JSON.parse built an array and three strings per job; in
  // a loop, 0.41 µs per job against 0.125). The aggregates share one pass over their input, so the
  // i-th id, payload and numbers are one job's; that input is sorted once, in claim order, and read
  // in that order (a statement that writes never runs in parallel), where an ORDER BY in each
  // aggregate would sort once per aggregate on PostgreSQL 15.
  // (These notes are not in the statement: its text is in the worker's bundle.)
  return sql`with recursive clock as (select ${nowExpr(request.now)} as now),
    ${windowed ? sql`${closedWindowsCte(request.windows ?? [], now)},` : sql``}
    ${settleCtes(schema, settle, request.completion, settleParams)},
    ${claimShapeCte(schema, {
      kinds,
      queues: request.queues,
      now,
      ...(hasDestinations(settle) ? { afterSettle: settleDone } : {}),
    })},
    ${
      limiting
        ? sql`${effectiveLimitsCte(schema, { declared: request.limits ?? [], kinds, queues: request.queues })},
    ${
      rated
        ? sql`${effectiveRateLimitsCte(schema, { declared: request.rateLimits ?? [], kinds, queues: request.queues })},
    ${rateHeldCte(schema, now)},`
        : sql`${noRateHeldCte()},`
    }
    ${heldCte(schema, (scope) => pausedNames(schema, scope), notEnding, {
      now,
      gate: settleDone,
    })},`
        : sql``
    }
    ${laneCte}
    ready as (
      select j.id from ${jobs} j
      where ${runnable} and j.concurrency_key is null ${notInLane}
      order by j.priority, j.run_at, j.id
      limit ${limit}
      for update skip locked
    ),
    expired as (
      select j.id from ${jobs} j
      where j.id = any(${lapsedLeases(schema, now, kinds, lapsedWindow(limit))})
        and j.state = 'running' and ${leaseRanOut(now)} and j.attempt < j.max_attempts
        and ${notPastDeadline} and ${mine} and ${notPaused(schema)} and ${inTurn} ${open} ${notSettling} ${afterSettle}
        ${limiting ? sql`and ${destinationOpen()}` : sql``}
      order by j.lease_expires_at
      limit ${limit}
      for update skip locked
    ),
    ${limitCtes}
    claimed as (
      update ${jobs} j set
        state = 'running',
        attempt = j.attempt + 1,
        lease_token = ${leaseToken}::uuid,
        lease_expires_at = ${now} + (${sql.param(leaseMs)}::int[])[array_position(${sql.param(kinds)}::text[], j.kind)]
          * interval '1 millisecond',
        locked_by = ${request.invocationId},
        started_at = coalesce(j.started_at, ${now}),
        attempted_at = ${now},
        updated_at = ${now},
        last_error = case when j.state = 'running' then ${rescueError} else j.last_error end,
        errors = case when j.state = 'running' then ${appendCapped(sql`j.errors`, rescueError)} else j.errors end
      where ${picked}
      returning j.id, j.kind, j.queue, j.payload, j.priority, j.attempt, j.max_attempts, j.correlation_id, j.run_at,
        j.ordering_key, j.destination, j.concurrency_key, j.progress, j.trace_context
    )${
      rated
        ? sql`,
    ${recordRateStartsCte(schema, { now })}`
        : sql``
    }
    select
      (select json_build_array(string_agg(c.id::text, ','), json_agg(c.payload),
          ('[' || string_agg(concat_ws(',', c.priority, c.attempt, c.max_attempts), ',') || ']')::json,
          min(c.kind), case when min(c.kind) <> max(c.kind) then json_agg(c.kind) end,
          min(c.queue), case when min(c.queue) <> max(c.queue) then json_agg(c.queue) end,
          json_agg(json_build_array(c.id::text, c.correlation_id, c.ordering_key, c.destination, c.progress,
            c.trace_context)) filter (where num_nonnulls(c.correlation_id, c.ordering_key, c.destination,
            c.progress, c.trace_context) > 0))
        from (select * from claimed order by priority, run_at, id) c having count(*) > 0) as jobs,
      ${settleReportJson()} as report,
      (select f.needed from shape f) as limited,
      (select f.ordered from shape f) as ordered,
      exists (select 1 from settled s where s.parent) as ended_parents,
      (select f.rated from shape f) as rated,
      ${hasDestinations(settle) ? movesJson() : sql`null::json`} as moves,
      ${limiting ? sql`(select json_agg(json_build_array(w.destination, w.job_id::text)) from probe_won w)` : sql`null::json`} as probes,
      ${rated ? sql`n.at_ms` : sql`null::float8`} as next_start_ms,
      ${rated ? sql`n.at_ms - ${epochMs(now)}` : sql`null::float8`} as next_start_in_ms
    ${rated ? sql`from (select ${nextStartMs()} as at_ms) n` : sql``}`;
}

/**
 * When a rate that held work back has room again: the earliest of rate_room's verdicts, the scopes
 * the snapshot saw used up, and the walked keys whose rate is used up. Reading it also runs
 * rate_taken (it records the starts).
 */
function nextStartMs(): SQL {
  return sql`(select ${epochMs(sql`least(
      (select min(r.next_at) from rate_rooms r), (select h.rate_next_at from held h),
      (select min(k.next_at) from key_rate k where k.room = 0))`)}
    where (select written from rate_taken) >= 0)`;
}
