import { randomUUID } from 'node:crypto';
import type { HttpApiEvent, LambdaContext } from '../adapters/lambda.js';

/** An API Gateway HTTP API (payload format 2.0) event, as Lambda receives it. */
export function httpApiEvent(options: {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  base64?: boolean;
  /** The query string's parameters (`?token=…`). */
  query?: Record<string, string>;
}): HttpApiEvent {
  const method = options.method ?? 'POST';
  const event = {
    version: '2.0',
    routeKey: `${method} /jobs`,
    rawPath: '/jobs',
    rawQueryString: new URLSearchParams(options.query ?? {}).toString(),
    ...(options.query ? { queryStringParameters: options.query } : {}),
    headers: {
      'content-type': 'application/json',
      host: 'abc123.execute-api.us-east-1.amazonaws.com',
      ...options.headers,
    },
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.us-east-1.amazonaws.com',
      http: { method, path: '/jobs', protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'curl/8.5.0' },
      requestId: 'JKJaXmPLvHcESHA=',
      routeKey: `${method} /jobs`,
      stage: '$default',
      time: '21/Nov/2026:21:00:00 +0000',
      timeEpoch: 1795294800000,
    },
    body:
      options.body === undefined
        ? undefined
        : options.base64
          ? Buffer.from(options.body).toString('base64')
          : options.body,
    isBase64Encoded: options.base64 ?? false,
  };
  return event;
}

/** An EventBridge scheduled event (the `schedule` trigger). */
export function scheduledEvent() {
  return {
    version: '0',
    id: '53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa',
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '123456789012',
    time: '2026-11-21T21:00:00Z',
    region: 'us-east-1',
    resources: ['arn:aws:events:us-east-1:123456789012:rule/skiplock-worker-schedule'],
    detail: {},
  };
}

/**
 * A Lambda context whose remaining time runs down from `remainingMs` in real time, with a request
 * id of its own (as each invocation has; the worker's invocationId) and the function's ARN (account
 * 123456789012, us-east-1: what an idle app's one-off wake-ups target).
 */
export function lambdaContext(remainingMs: number, functionName = 'skiplock-dev-worker'): LambdaContext {
  const deadline = Date.now() + remainingMs;
  return {
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    awsRequestId: randomUUID(),
    functionName,
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
  };
}
