/** What the emulator's server and an execution environment (runtime.ts) send each other over IPC. */

/** An error as Lambda reports it: the payload of a response with `X-Amz-Function-Error`. */
export interface FunctionErrorPayload {
  errorType: string;
  errorMessage: string;
  trace?: string[];
}

/** Server → environment: run one invocation. `deadline` is epoch ms (one clock: same machine). */
export interface InvokeMessage {
  requestId: string;
  event: unknown;
  deadline: number;
}

/**
 * Environment → server: how that invocation ended; `exiting` when the environment ends with it
 * (a crash, a failed init), so the server does not hand it the next invocation.
 */
export type RuntimeReply =
  | { requestId: string; ok: true; result: unknown }
  | { requestId: string; ok: false; error: FunctionErrorPayload; exiting?: boolean };
