import type { Outcome } from '../../base/outcomes.js';

/**
 * What a settle sends as parameters, apart from the outcomes' form (which decides its text): each
 * outcome's id and lease token, and the completions' results. A cached statement (claim-cache.ts)
 * is rendered with placeholders in their place and filled with these for each batch.
 */
export interface SettleParams {
  /** The batch's distinct lease tokens (a token is issued per claim: a handful per batch). */
  tokens: readonly string[];
  /** The ids, comma-separated (see idList). */
  ids: string;
  /** For each id, the position of its token in `tokens` (from 1), comma-separated. */
  tokenAt: string;
  /** The completions' results as one JSON array of {id, result}, when some return one. */
  results: string | undefined;
}

export function settleParams(outcomes: readonly Outcome[]): SettleParams {
  const tokens: string[] = [];
  const positions = new Map<string, number>();
  const ids: string[] = new Array(outcomes.length);
  const tokenAt: number[] = new Array(outcomes.length);
  let results: string[] | undefined;
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i] as Outcome;
    let position = positions.get(o.leaseToken);
    if (position === undefined) {
      tokens.push(o.leaseToken);
      position = tokens.length;
      positions.set(o.leaseToken, position);
    }
    ids[i] = o.id;
    tokenAt[i] = position;
    // Each handler's JSON text spliced in as it is (no re-parse).
    if (o.outcome === 'completed' && o.result !== undefined) {
      results ??= [];
      results.push(`{"id":${o.id},"result":${o.result}}`);
    }
  }
  return {
    tokens,
    ids: ids.join(','),
    tokenAt: tokenAt.join(','),
    results: results === undefined ? undefined : `[${results.join(',')}]`,
  };
}
