CREATE TABLE "skiplock"."invocations" (
	"worker" text NOT NULL,
	"slot" smallint NOT NULL,
	"invocation_id" text NOT NULL,
	"started_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "invocations_worker_slot_pk" PRIMARY KEY("worker","slot"),
	CONSTRAINT "invocations_slot_check" CHECK ("skiplock"."invocations"."slot" >= 1)
);
