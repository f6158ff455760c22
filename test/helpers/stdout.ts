/** Runs `fn` with process.stdout captured (nothing is printed); returns its result and what it wrote. */
export async function captureStdout<T>(fn: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  try {
    return { result: await fn(), lines };
  } finally {
    process.stdout.write = write;
  }
}
