/**
 * Runs `load` — a literal `import()` of an optional peer dependency, which bundlers leave external —
 * and turns "not installed" into the clear error `missing()` builds.
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
