CREATE TABLE "skiplock"."completed_counts" (
	"minute" timestamp with time zone NOT NULL,
	"queue" text NOT NULL,
	"kind" text NOT NULL,
	"completed" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "completed_counts_minute_idx" ON "skiplock"."completed_counts" USING btree ("minute");