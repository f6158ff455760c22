/**
 * HTML for the console, escaped by construction: `html` escapes every interpolated value unless it
 * is itself Html (a nested template, or `raw` for markup we wrote). No script anywhere — the CSP
 * forbids it — and one stylesheet, allowed by its nonce.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

function render(value: Value): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Markup written by this code (SVG built from numbers): never pass it input. */
export const raw = (markup: string) => new Html(markup);

/** `2026-11-23 14:05:09Z`; a dash for none. */
export function formatTime(at: Date | null | undefined): string {
  if (!at || !Number.isFinite(at.getTime())) return '–';
  return `${at.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** 75 → `1m 15s`; null → a dash. */
export function formatAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '–';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}

const STYLE = `
:root{--fg:#1c2430;--muted:#5f6b7a;--line:#dde3ea;--bg:#f6f8fa;--accent:#2456c9;--bad:#c2361f;--ok:#1f8a4c;--warn:#a86700}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;align-items:center;gap:24px;padding:10px 24px;background:#16202e;color:#fff}
header a{color:#cfd8e3;text-decoration:none}header a.on,header a:hover{color:#fff}
header .brand{font-weight:700;color:#fff;margin-right:8px}header .who{margin-left:auto;color:#9fb0c3;font-size:13px}
header form{display:inline}header button{background:none;border:1px solid #4a5a70;color:#cfd8e3;padding:3px 10px;border-radius:4px;cursor:pointer}
main{padding:20px 24px;max-width:1280px}h1{font-size:20px;margin:0 0 14px}h2{font-size:16px;margin:22px 0 10px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#eef2f6;font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:var(--muted)}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
a{color:var(--accent)}code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#fff;border:1px solid var(--line);padding:10px;overflow:auto;max-height:360px;margin:0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#e5eaf0}
.badge.dead,.badge.bad{background:#fbe3df;color:var(--bad)}.badge.completed{background:#dff3e7;color:var(--ok)}
.badge.running{background:#e1eafc;color:var(--accent)}.badge.cancelled{background:#eee;color:#666}.badge.paused{background:#fff1d6;color:var(--warn)}
.muted{color:var(--muted)}.bad{color:var(--bad)}.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px}
.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:12px 14px}
.card h3{margin:0 0 6px;font-size:13px;color:var(--muted);font-weight:600}
form.filters{display:flex;gap:10px;flex-wrap:wrap;align-items:end;margin:0 0 14px}
label{display:flex;flex-direction:column;font-size:12px;color:var(--muted);gap:3px}
input,select{font:inherit;padding:5px 8px;border:1px solid #c5ced8;border-radius:4px;background:#fff;color:var(--fg)}
button,.button{font:inherit;padding:5px 12px;border-radius:4px;border:1px solid #b7c2ce;background:#fff;color:var(--fg);cursor:pointer;text-decoration:none;display:inline-block}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}button.danger{background:var(--bad);border-color:var(--bad);color:#fff}
.actions{display:flex;gap:8px;flex-wrap:wrap;margin:10px 0}.actions form{display:inline}
.notice{padding:10px 14px;border-radius:6px;margin:0 0 14px;background:#e1eafc}.notice.bad{background:#fbe3df}.notice.ok{background:#dff3e7}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0}dt{color:var(--muted)}dd{margin:0}
ol.timeline{list-style:none;padding:0;margin:0}ol.timeline li{background:#fff;border:1px solid var(--line);border-left:4px solid var(--bad);padding:8px 12px;margin:0 0 8px;border-radius:4px}
ol.timeline li.info{border-left-color:var(--accent)}
.login{max-width:380px;margin:80px auto;background:#fff;border:1px solid var(--line);border-radius:8px;padding:24px}
.login form{display:flex;flex-direction:column;gap:12px}
svg text{font:11px system-ui,sans-serif;fill:var(--muted)}
`;

export interface Page {
  title: string;
  /** The nav entry to highlight. */
  section?: 'overview' | 'jobs' | 'dlq' | 'flow' | 'events' | 'schedules';
  body: Html;
}

export interface Chrome {
  base: string;
  nonce: string;
  /** Absent on the login page. */
  session?: { who: string; readOnly: boolean; csrf: string };
}

export function layout(page: Page, chrome: Chrome): string {
  const { base, session } = chrome;
  const nav = (section: Page['section'], href: string, label: string) =>
    html`<a href="${base}${href}" class="${page.section === section ? 'on' : ''}">${label}</a>`;
  const header = session
    ? html`<header><span class="brand">skiplock</span>${nav('overview', '/', 'Overview')}${nav('jobs', '/jobs', 'Jobs')}${nav(
        'dlq',
        '/dlq',
        'Dead letters',
      )}${nav('events', '/events', 'Events')}${nav('flow', '/flow', 'Controls')}${nav('schedules', '/schedules', 'Schedules')}<span class="who">${session.who}${session.readOnly ? ' · read-only' : ''}</span>
      <form method="post" action="${base}/logout"><input type="hidden" name="csrf" value="${session.csrf}"><button>Log out</button></form></header>`
    : html``;
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${page.title} · skiplock</title><meta name="referrer" content="same-origin"><style nonce="${chrome.nonce}">${raw(STYLE)}</style></head>
<body>${header}<main>${page.body}</main></body></html>`.value;
}
