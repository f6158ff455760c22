// Run windows (docs/kinds-and-enqueue.md#run-windows).
import { defineJob, defineQueue } from 'skiplock';
import { z } from 'zod';

declare function exportWarehouse(day: string): Promise<void>;

// #region run-window
// Heavy exports only at night in Berlin (the window wraps past midnight).
export const warehouseExport = defineJob({
  kind: 'warehouse-export',
  payload: z.object({ day: z.string() }),
  runWindow: { start: '23:00', end: '06:00', timezone: 'Europe/Berlin' },
  handler: async (p) => exportWarehouse(p.day),
});

// Or a whole queue: bulk mail only during the working day, UTC.
export const bulk = defineQueue({ name: 'bulk-mail', runWindow: { start: '09:00', end: '17:30' } });
// #endregion run-window
