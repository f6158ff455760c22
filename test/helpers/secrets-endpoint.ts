import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local AWS Secrets Manager: answers GetSecretValue (POST / with
 * x-amz-target: secretsmanager.GetSecretValue) from a map the test controls, and counts calls.
 * The real SDK client reaches it through AWS_ENDPOINT_URL_SECRETS_MANAGER.
 */
export async function startSecretsEndpoint() {
  /** A secret's successive values: each call takes the next, the last one repeats (rotation). */
  const secrets = new Map<string, string | string[]>();
  const calls: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { SecretId?: string };
      res.setHeader('content-type', 'application/x-amz-json-1.1');
      if (target !== 'secretsmanager.GetSecretValue') {
        res.statusCode = 400;
        res.end(JSON.stringify({ __type: 'UnknownOperationException', message: target }));
        return;
      }
      const id = body.SecretId ?? '';
      calls.push(id);
      const stored = secrets.get(id);
      const value = Array.isArray(stored) ? (stored.length > 1 ? stored.shift() : stored[0]) : stored;
      if (value === undefined) {
        res.statusCode = 400;
        res.end(
          JSON.stringify({
            __type: 'ResourceNotFoundException',
            message: "Secrets Manager can't find the specified secret.",
          }),
        );
        return;
      }
      res.end(
        JSON.stringify({
          ARN: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${id}`,
          Name: id,
          SecretString: value,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    secrets,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The environment that points the real AWS SDK at the local endpoint, with dummy credentials. */
export function awsEnvFor(endpointUrl: string): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpointUrl,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIDLOCALTESTING',
    AWS_SECRET_ACCESS_KEY: 'local-testing-secret',
  };
}
