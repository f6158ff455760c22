import { expect, it } from 'vitest';
import { eventsSection } from '../../bench/events.js';

it("the events_publish section shows each system's events/s, their ratio and statements per publish", () => {
  const md = eventsSection({
    events_publish: {
      subscribers: 5,
      events: 5_000,
      per_second: { skiplock: 900, 'pg-boss': 300 },
      statements_per_publish: { skiplock: 1, 'pg-boss': 6 },
    },
  });
  expect(md).toContain('## Events: publish to 5 subscribers');
  expect(md).toContain('| events/s | 900 | 300 | 3.00 |');
  expect(md).toContain('| statements per publish | 1 | 6 | |');
  expect(eventsSection({})).toBe('');
});
