ALTER TABLE "skiplock"."jobs" ADD COLUMN "ordering_key" text;--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD COLUMN "ordering_hold" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "jobs_ordering_idx" ON "skiplock"."jobs" USING btree ("ordering_key","id") WHERE ordering_key is not null and state in ('queued', 'running', 'dead');--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_ordering_running_uq" ON "skiplock"."jobs" USING btree ("ordering_key") WHERE ordering_key is not null and state = 'running';--> statement-breakpoint
CREATE INDEX "jobs_parked_idx" ON "skiplock"."jobs" USING btree ("ordering_key","id") WHERE ordering_key is not null and state = 'queued' and run_at = 'infinity';