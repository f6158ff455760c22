/**
 * Runs `load` — a literal `import()` of an optional peer dependency — and turns "not installed"
 * into the clear error `missing()` builds. Each such import carries `webpackIgnore` and
 * `turbopackIgnore`: Next.js's bundlers otherwise resolve every literal `import()` at build time and
 * fail the build of an app that lacks the peer. Ignored, the import stays in the output as written
 * and Node resolves it when it runs — but Next's file tracing does not follow it either, so a
 * deployed Next.js app would not carry the peer: the Next.js templates pass Next's own `after` as
 * `waitUntil` instead of loading @vercel/functions. esbuild ignores the comments: the Lambda
 * templates mark the AWS SDK external.
 */
export async function importOptionalPeer<T>(load: () => Promise<T>, missing: () => Error): Promise<T> {
  try {
    return await load();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') throw missing();
    throw err;
  }
}
