// `npx cdk synth` / `npx cdk deploy` run this (cdk.json). Settings come from the context: cdk.json's,
// or `-c name=value` on the command line (secrets: never in cdk.json, which is committed).
import { App } from 'aws-cdk-lib';
import { SkiplockStack } from './skiplock-stack.js';

const app = new App();
const context = (name: string): string | undefined => {
  const value: unknown = app.node.tryGetContext(name);
  return typeof value === 'string' && value !== '' ? value : undefined;
};
const databaseSecretArn = context('databaseSecretArn');
if (!databaseSecretArn)
  throw new Error('set the context value databaseSecretArn (cdk.json, or -c databaseSecretArn=arn:…)');

new SkiplockStack(app, context('stackName') ?? 'skiplock', {
  databaseSecretArn,
  driver: context('driver') as 'pg' | 'neon-ws' | 'neon-http' | undefined,
  schema: context('schema'),
  enqueueToken: context('enqueueToken'),
  adminToken: context('adminToken'),
  consoleViewerToken: context('consoleViewerToken'),
  signalSecret: context('signalSecret'),
  webhookSigningSecret: context('webhookSigningSecret'),
  // -c idle=false: tick every minute instead of one-off wake-ups.
  idle: context('idle') !== 'false',
});
