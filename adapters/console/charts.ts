import type { ActivityBucket } from '../../core/admin.js';
import { escapeHtml, type Html, raw } from './html.js';

/**
 * Inline SVG charts built from numbers only (no script, no library): jobs finished per bucket as
 * stacked bars (completed, dead), and the error rate (dead ÷ finished) per bucket as a line.
 */
const W = 560;
const H = 150;
const PAD = { left: 40, right: 8, top: 10, bottom: 22 };

const fmt = (n: number) =>
  n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : `${n}`;
const round = (n: number) => Math.round(n * 10) / 10;

function axisLabel(startMs: number, bucketMs: number): string {
  const d = new Date(startMs);
  const hh = String(d.getUTCHours()).padStart(2, '0');
  const mm = String(d.getUTCMinutes()).padStart(2, '0');
  return bucketMs >= 3_600_000 ? `${hh}:00` : `${hh}:${mm}`;
}

function frame(title: string, maxLabel: string, inner: string, buckets: ActivityBucket[], bucketMs: number): Html {
  const plotW = W - PAD.left - PAD.right;
  const ticks = [0, Math.floor(buckets.length / 2), buckets.length - 1]
    .filter((i, k, all) => all.indexOf(i) === k && buckets[i])
    .map((i) => {
      const x = PAD.left + (i * plotW) / buckets.length;
      const anchor = i === 0 ? 'start' : i === buckets.length - 1 ? 'end' : 'middle';
      const at = i === buckets.length - 1 ? PAD.left + plotW : x;
      const label = i === buckets.length - 1 ? 'now' : axisLabel((buckets[i] as ActivityBucket).startMs, bucketMs);
      return `<text x="${round(at)}" y="${H - 6}" text-anchor="${anchor}">${label}</text>`;
    })
    .join('');
  return raw(
    `<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${escapeHtml(title)}">` +
      `<line x1="${PAD.left}" y1="${H - PAD.bottom}" x2="${W - PAD.right}" y2="${H - PAD.bottom}" stroke="#c5ced8"/>` +
      `<text x="${PAD.left - 4}" y="${PAD.top + 8}" text-anchor="end">${escapeHtml(maxLabel)}</text>` +
      `<text x="${PAD.left - 4}" y="${H - PAD.bottom}" text-anchor="end">0</text>${inner}${ticks}</svg>`,
  );
}

/** Completed (green) and dead (red) per bucket, stacked. */
export function throughputChart(title: string, buckets: ActivityBucket[], bucketMs: number): Html {
  const max = Math.max(1, ...buckets.map((b) => b.completed + b.dead));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, buckets.length);
  const bars = buckets
    .map((b, i) => {
      const x = round(PAD.left + i * slot + slot * 0.1);
      const w = round(Math.max(0.5, slot * 0.8));
      const hOk = (b.completed / max) * plotH;
      const hDead = (b.dead / max) * plotH;
      const base = H - PAD.bottom;
      const tip = `<title>${axisLabel(b.startMs, bucketMs)}: ${b.completed} completed, ${b.dead} dead</title>`;
      return (
        (b.completed > 0
          ? `<rect x="${x}" y="${round(base - hOk)}" width="${w}" height="${round(hOk)}" fill="#3aa36b">${tip}</rect>`
          : '') +
        (b.dead > 0
          ? `<rect x="${x}" y="${round(base - hOk - hDead)}" width="${w}" height="${round(hDead)}" fill="#d2472f">${tip}</rect>`
          : '')
      );
    })
    .join('');
  return frame(title, fmt(max), bars, buckets, bucketMs);
}

/** Dead ÷ (completed + dead) per bucket, 0–100 %; buckets where nothing finished leave a gap. */
export function errorRateChart(title: string, buckets: ActivityBucket[], bucketMs: number): Html {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, buckets.length);
  const segments: string[][] = [[]];
  buckets.forEach((b, i) => {
    const finished = b.completed + b.dead;
    if (finished === 0) {
      segments.push([]);
      return;
    }
    const x = round(PAD.left + (i + 0.5) * slot);
    const y = round(H - PAD.bottom - (b.dead / finished) * plotH);
    segments[segments.length - 1]?.push(`${x},${y}`);
  });
  const lines = segments
    .filter((s) => s.length > 0)
    .map((s) =>
      s.length === 1
        ? `<circle cx="${s[0]?.split(',')[0]}" cy="${s[0]?.split(',')[1]}" r="2.5" fill="#d2472f"/>`
        : `<polyline points="${s.join(' ')}" fill="none" stroke="#d2472f" stroke-width="2"/>`,
    )
    .join('');
  return frame(title, '100%', lines, buckets, bucketMs);
}
