CREATE TABLE "skiplock"."schedules" (
	"name" text PRIMARY KEY NOT NULL,
	"cron" text NOT NULL,
	"timezone" text NOT NULL,
	"kind" text NOT NULL,
	"last_occurrence" timestamp with time zone NOT NULL,
	"last_job_id" bigint,
	"last_enqueued_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
