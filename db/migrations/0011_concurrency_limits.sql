CREATE TABLE "skiplock"."limits" (
	"scope" text NOT NULL,
	"name" text NOT NULL,
	"max_running" integer NOT NULL,
	"set_at" timestamp with time zone NOT NULL,
	"set_by" text NOT NULL,
	"reason" text,
	CONSTRAINT "limits_scope_name_pk" PRIMARY KEY("scope","name"),
	CONSTRAINT "limits_scope_check" CHECK ("skiplock"."limits"."scope" in ('queue', 'kind', 'key')),
	CONSTRAINT "limits_max_running_check" CHECK ("skiplock"."limits"."max_running" >= 1)
);
--> statement-breakpoint
DROP INDEX "skiplock"."jobs_claim_idx";--> statement-breakpoint
DROP INDEX "skiplock"."jobs_claim_lane_idx";--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD COLUMN "concurrency_key" text;--> statement-breakpoint
CREATE INDEX "jobs_keyed_idx" ON "skiplock"."jobs" USING btree (hashtext(concurrency_key),"queue","concurrency_key","priority","run_at","id") WHERE state = 'queued' and concurrency_key is not null;--> statement-breakpoint
CREATE INDEX "jobs_running_keyed_idx" ON "skiplock"."jobs" USING btree ("queue","concurrency_key") WHERE state = 'running' and concurrency_key is not null;--> statement-breakpoint
CREATE INDEX "jobs_claim_idx" ON "skiplock"."jobs" USING btree ("priority","run_at","id") WHERE state = 'queued' and concurrency_key is null;--> statement-breakpoint
CREATE INDEX "jobs_claim_lane_idx" ON "skiplock"."jobs" USING btree (((id / 64) % 16),"priority","run_at","id") WHERE state = 'queued' and concurrency_key is null;