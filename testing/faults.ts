/**
 * Faults the local stand-ins (the Neon HTTP endpoint, the Neon WebSocket proxy, the TCP proxy for
 * node-postgres) inflict on purpose, the way a network, Neon's proxy or a waking compute does. A
 * test arms one fault for the next statement it matches (`inject`); a chaos run draws them at
 * random (`setRandom`). Either way the stand-in decides per statement (per request over HTTP) with
 * `decide`, and counts what it did.
 */

/**
 * - `refuse`: the statement never reaches Postgres. HTTP: a 503 answer; the wire: the connection
 *   is closed before the statement is forwarded.
 * - `drop`: the statement never reaches Postgres, and the connection is dropped without an answer.
 * - `lose-answer`: the statement runs; once its transaction has ended (at once outside one, after
 *   COMMIT inside one; over HTTP, once the request's statements committed) the connection drops
 *   before the client hears of it. The answer lost after COMMIT.
 * - `slow`: the answer is held `delayMs` after the statement ran.
 * - `half-open`: the statement is forwarded, then nothing more flows either way while both ends
 *   stay open (a dead peer, a dropped NAT mapping). HTTP: the request is never answered. The
 *   stand-in lets go after `delayMs`.
 */
export type FaultMode = 'refuse' | 'drop' | 'lose-answer' | 'slow' | 'half-open';

export const FAULT_MODES: readonly FaultMode[] = ['refuse', 'drop', 'lose-answer', 'slow', 'half-open'];

export interface FaultRule {
  mode: FaultMode;
  /**
   * Which statements: a substring (case-insensitive) or a RegExp of the SQL text. Over HTTP a batch
   * matches when any of its statements does; on the wire, the simple query or the Parse message's
   * text (a named statement is matched when it is first parsed). @defaultValue every statement
   */
  match?: string | RegExp;
  /** How many statements it hits. @defaultValue 1 */
  times?: number;
  /** `slow`: how long the answer waits; `half-open`: how long before the stand-in lets go. @defaultValue 2000 / 20000 */
  delayMs?: number;
}

/** Chances per statement (0..1) of each fault, for chaos runs. */
export interface RandomFaults {
  refuse?: number;
  drop?: number;
  loseAnswer?: number;
  halfOpen?: number;
  slow?: { share: number; minMs: number; maxMs: number };
  /** The wire only: every frame from the server waits up to this long, at random (the order is kept). */
  frameDelayMs?: number;
  /**
   * The wire only: chance per open connection per 100 ms of a fault between statements — a close
   * (reset) or, with `halfOpenShare` of them, a freeze.
   */
  connectionFaultPerTick?: number;
  halfOpenShare?: number;
}

export interface FaultDecision {
  mode: FaultMode;
  delayMs: number;
}

export type FaultCounts = Record<FaultMode | 'asleep' | 'connectionResets' | 'connectionFreezes', number>;

const DEFAULT_DELAY: Record<FaultMode, number> = {
  refuse: 0,
  drop: 0,
  'lose-answer': 0,
  slow: 2_000,
  'half-open': 20_000,
};

interface ArmedRule {
  rule: FaultRule;
  left: number;
}

/** The faults one stand-in inflicts: armed rules first, then the random draw. */
export class Faults {
  #armed: ArmedRule[] = [];
  #random: RandomFaults | undefined;
  #asleepUntil = 0;
  #enabled = true;
  /** Connections or requests held half-open right now (the stand-ins report them). */
  #holding = 0;
  readonly #counts: FaultCounts = {
    refuse: 0,
    drop: 0,
    'lose-answer': 0,
    slow: 0,
    'half-open': 0,
    asleep: 0,
    connectionResets: 0,
    connectionFreezes: 0,
  };
  readonly #random01: () => number;

  constructor(options: { random?: () => number } = {}) {
    this.#random01 = options.random ?? Math.random;
  }

  /** Arms `rule` for the next statements it matches. */
  inject(rule: FaultRule): this {
    if (!(FAULT_MODES as readonly string[]).includes(rule.mode))
      throw new RangeError(`unknown fault mode ${rule.mode}`);
    this.#armed.push({ rule, left: rule.times ?? 1 });
    return this;
  }

  /** Disarms every rule and stops the random draw (the counts stay). */
  clear(): this {
    this.#armed = [];
    this.#random = undefined;
    this.#asleepUntil = 0;
    return this;
  }

  /** Draws faults at random from now on (undefined: none). */
  setRandom(random: RandomFaults | undefined): this {
    this.#random = random;
    return this;
  }

  /** The random faults in force, if any (the wire proxies read the per-connection ones). */
  get random(): RandomFaults | undefined {
    return this.#enabled ? this.#random : undefined;
  }

  /**
   * A compute asleep: every statement is refused for `ms` (wall time), as a compute waking from
   * scale-to-zero refuses connections until it is up.
   */
  sleep(ms: number): this {
    this.#asleepUntil = Date.now() + ms;
    return this;
  }

  /** Turns every fault off (armed ones stay armed) or back on. */
  setEnabled(on: boolean): this {
    this.#enabled = on;
    return this;
  }

  /** Connections or requests the stand-ins hold half-open right now: what a test may wait out. */
  get holding(): number {
    return this.#holding;
  }

  /** A stand-in began (+1) or stopped (-1) holding a connection or a request half-open. */
  held(change: 1 | -1): void {
    this.#holding = Math.max(0, this.#holding + change);
  }

  /** Armed rules not yet used up. */
  get armed(): number {
    return this.#armed.reduce((n, a) => n + a.left, 0);
  }

  /**
   * The fault for a statement with this SQL text, if any; counted. Armed rules match every
   * statement; the random draw is made once per transaction (`draw` false for the statements after
   * the first one of a transaction), so a long transaction is not hit more often than a short one.
   */
  decide(text: string, draw = true): FaultDecision | undefined {
    if (!this.#enabled) return undefined;
    if (Date.now() < this.#asleepUntil) {
      this.#counts.asleep++;
      return { mode: 'refuse', delayMs: 0 };
    }
    const armed = this.#armed.find((a) => matches(a.rule.match, text));
    if (armed) {
      armed.left--;
      if (armed.left <= 0) this.#armed.splice(this.#armed.indexOf(armed), 1);
      return this.#counted(armed.rule.mode, armed.rule.delayMs ?? DEFAULT_DELAY[armed.rule.mode]);
    }
    const random = this.#random;
    if (!random || !draw) return undefined;
    const roll = this.#random01();
    let edge = 0;
    for (const [mode, share] of [
      ['refuse', random.refuse],
      ['drop', random.drop],
      ['lose-answer', random.loseAnswer],
      ['half-open', random.halfOpen],
    ] as const) {
      edge += share ?? 0;
      if (roll < edge) return this.#counted(mode, DEFAULT_DELAY[mode]);
    }
    if (random.slow && this.#random01() < random.slow.share) {
      const { minMs, maxMs } = random.slow;
      return this.#counted('slow', minMs + this.#random01() * (maxMs - minMs));
    }
    return undefined;
  }

  /** A connection fault between statements (the wire proxies' ticker): none, a reset or a freeze. */
  drawConnectionFault(): 'reset' | 'freeze' | undefined {
    const random = this.random;
    if (!random?.connectionFaultPerTick || this.#random01() >= random.connectionFaultPerTick) return undefined;
    if (this.#random01() < (random.halfOpenShare ?? 0)) {
      this.#counts.connectionFreezes++;
      return 'freeze';
    }
    this.#counts.connectionResets++;
    return 'reset';
  }

  /** A frame's delay under `frameDelayMs` (0 without it). */
  frameDelay(): number {
    const max = this.random?.frameDelayMs ?? 0;
    return max > 0 ? this.#random01() * max : 0;
  }

  counts(): FaultCounts {
    return { ...this.#counts };
  }

  #counted(mode: FaultMode, delayMs: number): FaultDecision {
    this.#counts[mode]++;
    return { mode, delayMs };
  }
}

function matches(match: FaultRule['match'], text: string): boolean {
  if (match === undefined) return true;
  if (typeof match === 'string') return text.toLowerCase().includes(match.toLowerCase());
  match.lastIndex = 0;
  return match.test(text);
}
