import type { FaultDecision, Faults } from './faults.js';

/** Where a link's bytes go: the stand-in's two sockets. */
export interface WireEnds {
  toServer(chunk: Buffer): void;
  toClient(chunk: Buffer): void;
  /** Closes both ends at once (a reset: no goodbye to either side). */
  reset(): void;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/**
 * One client connection through a stand-in that speaks Postgres's wire protocol (the TCP proxy for
 * node-postgres, the WebSocket proxy for Neon's Pool): bytes pass through unchanged, but the link
 * reads the messages to find each statement's text and the end of each transaction, so a fault
 * lands where the `Faults` decide — before a statement reaches Postgres, after its transaction
 * committed, or on its answer.
 */
export class WireLink {
  readonly #ends: WireEnds;
  readonly #faults: Faults;
  #clientBuffer: Buffer = Buffer.alloc(0);
  /** The server stream's reader: the header of the message being read, the rest of its body to pass. */
  #header: Buffer = Buffer.alloc(0);
  #skip = 0;
  #wantStatus = false;
  /** Before the startup message, client messages carry no type byte. */
  #startup = true;
  /** An SSL/GSS request was sent: the server's next byte is its one-byte answer. */
  #serverSingleByte = false;
  /** Named statements' text (a Bind to one is matched by it). */
  readonly #named = new Map<string, string>();
  /** Drop the connection when the current transaction ends, before its answer reaches the client. */
  #loseAtIdle = false;
  /** The server said a transaction is open (its last ReadyForQuery): random faults wait for its end. */
  #inTransaction = false;
  #closed = false;
  #frozen = false;
  /** Server bytes held back (a slow answer, delayed frames), in order, each with when it may go. */
  readonly #outgoing: { chunk: Buffer; at: number }[] = [];
  #holdUntil = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(ends: WireEnds, faults: Faults) {
    this.#ends = ends;
    this.#faults = faults;
  }

  get closed(): boolean {
    return this.#closed;
  }

  fromClient(chunk: Buffer): void {
    if (this.#closed || this.#frozen) return;
    this.#clientBuffer = this.#clientBuffer.length === 0 ? chunk : Buffer.concat([this.#clientBuffer, chunk]);
    let complete = 0;
    let decision: FaultDecision | undefined;
    for (;;) {
      const at = complete;
      const buffer = this.#clientBuffer;
      if (this.#startup) {
        if (buffer.length < at + 8) break;
        const length = buffer.readInt32BE(at);
        if (buffer.length < at + length) break;
        const code = buffer.readInt32BE(at + 4);
        if (code === SSL_REQUEST || code === GSSENC_REQUEST) this.#serverSingleByte = true;
        else this.#startup = false;
        complete = at + length;
        continue;
      }
      if (buffer.length < at + 5) break;
      const length = buffer.readInt32BE(at + 1);
      if (buffer.length < at + 1 + length) break;
      const text = this.#statementText(buffer.subarray(at, at + 1 + length));
      complete = at + 1 + length;
      if (text !== undefined) decision ??= this.#faults.decide(text, !this.#inTransaction);
    }
    if (complete === 0) return;
    const forward = this.#clientBuffer.subarray(0, complete);
    this.#clientBuffer = this.#clientBuffer.subarray(complete);
    if (decision?.mode === 'refuse' || decision?.mode === 'drop') {
      this.close();
      return;
    }
    this.#ends.toServer(forward);
    if (decision?.mode === 'lose-answer') this.#loseAtIdle = true;
    else if (decision?.mode === 'slow') this.#holdUntil = Date.now() + decision.delayMs;
    else if (decision?.mode === 'half-open') this.freeze(decision.delayMs);
  }

  fromServer(chunk: Buffer): void {
    if (this.#closed || this.#frozen) return;
    if (this.#endsTransaction(chunk) && this.#loseAtIdle) {
      this.close();
      return;
    }
    const delay = this.#faults.frameDelay();
    if (delay === 0 && this.#holdUntil <= Date.now() && this.#outgoing.length === 0) {
      this.#ends.toClient(chunk);
      return;
    }
    const last = this.#outgoing.at(-1)?.at ?? 0;
    this.#outgoing.push({ chunk, at: Math.max(Date.now() + delay, this.#holdUntil, last) });
    this.#schedule();
  }

  /** Nothing flows either way any more; both ends stay open until `ms` have passed. */
  freeze(ms: number): void {
    if (this.#closed || this.#frozen) return;
    this.#frozen = true;
    this.#faults.held(1);
    setTimeout(() => this.close(), ms).unref();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#frozen) this.#faults.held(-1);
    if (this.#timer) clearTimeout(this.#timer);
    this.#outgoing.length = 0;
    this.#ends.reset();
  }

  #schedule(): void {
    if (this.#timer || this.#outgoing.length === 0) return;
    const wait = Math.max(0, (this.#outgoing[0]?.at ?? 0) - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const now = Date.now();
      while (!this.#closed && !this.#frozen && (this.#outgoing[0]?.at ?? Number.POSITIVE_INFINITY) <= now) {
        this.#ends.toClient((this.#outgoing.shift() as { chunk: Buffer }).chunk);
      }
      this.#schedule();
    }, wait);
  }

  /** The SQL a client message carries, when it starts a statement (simple query, Parse, Bind to a named one). */
  #statementText(message: Buffer): string | undefined {
    const type = String.fromCharCode(message[0] as number);
    const body = message.subarray(5);
    if (type === 'Q') return cString(body, 0).text;
    if (type === 'P') {
      const name = cString(body, 0);
      const text = cString(body, name.next).text;
      if (name.text === '') return text;
      this.#named.set(name.text, text);
      return undefined; // matched when it is bound, which it is each time it runs
    }
    if (type === 'B') {
      const portal = cString(body, 0);
      const statement = cString(body, portal.next).text;
      return statement === '' ? undefined : this.#named.get(statement);
    }
    return undefined;
  }

  /**
   * Reads the server's bytes as they pass (message boundaries only): whether they hold a
   * ReadyForQuery that says no transaction is open.
   */
  #endsTransaction(chunk: Buffer): boolean {
    let idle = false;
    let i = 0;
    if (this.#serverSingleByte && this.#skip === 0 && this.#header.length === 0 && chunk.length > 0) {
      this.#serverSingleByte = false;
      i = 1;
    }
    while (i < chunk.length) {
      if (this.#skip > 0) {
        if (this.#wantStatus) {
          if (chunk[i] === 0x49 /* I */) idle = true;
          this.#inTransaction = chunk[i] !== 0x49;
          this.#wantStatus = false;
        }
        const n = Math.min(this.#skip, chunk.length - i);
        this.#skip -= n;
        i += n;
        continue;
      }
      const take = Math.min(5 - this.#header.length, chunk.length - i);
      this.#header = Buffer.concat([this.#header, chunk.subarray(i, i + take)]);
      i += take;
      if (this.#header.length < 5) break;
      this.#skip = this.#header.readInt32BE(1) - 4;
      this.#wantStatus = this.#header[0] === 0x5a /* Z */;
      this.#header = Buffer.alloc(0);
    }
    return idle;
  }
}

function cString(buffer: Buffer, from: number): { text: string; next: number } {
  const end = buffer.indexOf(0, from);
  const stop = end < 0 ? buffer.length : end;
  return { text: buffer.toString('utf8', from, stop), next: stop + 1 };
}
