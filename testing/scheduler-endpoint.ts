import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A one-off schedule the stand-in holds, as CreateSchedule described it. */
export interface LocalSchedule {
  name: string;
  group: string;
  /** The minute (or second) `at(…)` names, read in ScheduleExpressionTimezone (UTC only here). */
  at: Date;
  expression: string;
  targetArn: string;
  roleArn: string;
  /** The target's input, parsed from JSON. */
  input: unknown;
  actionAfterCompletion: string | undefined;
}

/** An answer the stand-in gives every CreateSchedule instead (e.g. a role it may not pass). */
export interface SchedulerRefusal {
  status: number;
  type: string;
  message: string;
}

export interface LocalScheduler {
  /** Point the AWS SDK at it: `AWS_ENDPOINT_URL_SCHEDULER`. */
  url: string;
  /** Every CreateSchedule that was accepted, in order (fired or not). */
  created: LocalSchedule[];
  /** CreateSchedule requests received, accepted or not (a conflict, a refusal). */
  requests(): number;
  /** The schedules waiting to fire, earliest first. */
  pending(): LocalSchedule[];
  /** From now on every CreateSchedule gets this answer; undefined: accept again. */
  refuse(refusal: SchedulerRefusal | undefined): void;
  /**
   * Fires, earliest first, every schedule due at or before `now` (the test's clock: nothing here
   * reads the time): runs its target's handler with its input and waits for it, then deletes it
   * (`ActionAfterCompletion: DELETE`). A schedule a handler arms that is due by `now` fires too.
   * Returns what fired.
   */
  fireDue(now: Date): Promise<LocalSchedule[]>;
  close(): Promise<void>;
}

const NAME = /^[0-9A-Za-z_.-]{1,64}$/;
const AT = /^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$/;

/**
 * A local EventBridge Scheduler for tests (the REST-JSON API the real `@aws-sdk/client-scheduler`
 * speaks: `POST /schedules/{Name}` creates, `GET` reads, `DELETE` deletes), reached through
 * AWS_ENDPOINT_URL_SCHEDULER. It holds one-off `at(…)` schedules and fires them when the test says
 * the time has come: `targets` maps a function's name (or ARN) to its handler. Like the real service
 * it answers ConflictException for a name its group already holds, and checks the name, the
 * expression and the target.
 */
export async function startLocalScheduler(
  targets: Record<string, (event: unknown) => Promise<unknown>> = {},
): Promise<LocalScheduler> {
  const created: LocalSchedule[] = [];
  const live = new Map<string, LocalSchedule>();
  let refusal: SchedulerRefusal | undefined;
  let requests = 0;
  const key = (group: string, name: string) => `${group}/${name}`;

  const answer = (res: ServerResponse, status: number, body: object, type?: string) => {
    res.writeHead(status, { 'content-type': 'application/json', ...(type ? { 'x-amzn-errortype': type } : {}) });
    res.end(JSON.stringify(body));
  };
  const fail = (res: ServerResponse, status: number, type: string, message: string) =>
    answer(res, status, { Message: message }, type);

  const create = (res: ServerResponse, name: string, body: Record<string, unknown>) => {
    requests++;
    if (refusal) return fail(res, refusal.status, refusal.type, refusal.message);
    const group = typeof body.GroupName === 'string' ? body.GroupName : 'default';
    const target = (body.Target ?? {}) as { Arn?: unknown; RoleArn?: unknown; Input?: unknown };
    const at = AT.exec(String(body.ScheduleExpression ?? ''));
    if (!NAME.test(name)) return fail(res, 400, 'ValidationException', `invalid schedule name ${name}`);
    if (!at) return fail(res, 400, 'ValidationException', 'only at(yyyy-mm-ddThh:mm:ss) schedules are served here');
    if ((body.ScheduleExpressionTimezone ?? 'UTC') !== 'UTC') {
      return fail(res, 400, 'ValidationException', 'only UTC is served here');
    }
    if (typeof target.Arn !== 'string' || typeof target.RoleArn !== 'string') {
      return fail(res, 400, 'ValidationException', 'Target.Arn and Target.RoleArn are required');
    }
    if (live.has(key(group, name))) return fail(res, 409, 'ConflictException', `Schedule ${name} already exists.`);
    const schedule: LocalSchedule = {
      name,
      group,
      at: new Date(`${at[1]}Z`),
      expression: String(body.ScheduleExpression),
      targetArn: target.Arn,
      roleArn: target.RoleArn,
      input: typeof target.Input === 'string' ? JSON.parse(target.Input) : undefined,
      actionAfterCompletion: typeof body.ActionAfterCompletion === 'string' ? body.ActionAfterCompletion : undefined,
    };
    live.set(key(group, name), schedule);
    created.push(schedule);
    answer(res, 200, { ScheduleArn: `arn:aws:scheduler:us-east-1:123456789012:schedule/${group}/${name}` });
  };

  const handle = (req: IncomingMessage, res: ServerResponse, text: string) => {
    const url = new URL(req.url ?? '/', 'http://local');
    const match = /^\/schedules\/([^/]+)$/.exec(url.pathname);
    if (!match) return fail(res, 404, 'ResourceNotFoundException', 'not found');
    const name = decodeURIComponent(match[1] as string);
    if (req.method === 'POST') return create(res, name, text ? (JSON.parse(text) as Record<string, unknown>) : {});
    const found = live.get(key(url.searchParams.get('groupName') ?? 'default', name));
    if (!found) return fail(res, 404, 'ResourceNotFoundException', `Schedule ${name} does not exist.`);
    if (req.method === 'DELETE') {
      live.delete(key(found.group, found.name));
      return answer(res, 200, {});
    }
    answer(res, 200, {
      Name: found.name,
      GroupName: found.group,
      ScheduleExpression: found.expression,
      ScheduleExpressionTimezone: 'UTC',
      Target: { Arn: found.targetArn, RoleArn: found.roleArn, Input: JSON.stringify(found.input) },
      ActionAfterCompletion: found.actionAfterCompletion,
      FlexibleTimeWindow: { Mode: 'OFF' },
      State: 'ENABLED',
    });
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  const handlerOf = (arn: string) => targets[arn] ?? targets[arn.split(':')[6] ?? ''];
  const pending = () => [...live.values()].sort((a, b) => a.at.getTime() - b.at.getTime());
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    created,
    requests: () => requests,
    pending,
    refuse(next) {
      refusal = next;
    },
    async fireDue(now) {
      const fired: LocalSchedule[] = [];
      for (let next = pending()[0]; next && next.at <= now; next = pending()[0]) {
        // A one-off fires once (and ActionAfterCompletion DELETE removes it: its name is free again).
        live.delete(key(next.group, next.name));
        fired.push(next);
        await handlerOf(next.targetArn)?.(next.input);
      }
      return fired;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
