CREATE TABLE "skiplock"."pauses" (
	"scope" text NOT NULL,
	"name" text NOT NULL,
	"paused_at" timestamp with time zone NOT NULL,
	"paused_by" text NOT NULL,
	"reason" text,
	CONSTRAINT "pauses_scope_name_pk" PRIMARY KEY("scope","name"),
	CONSTRAINT "pauses_scope_check" CHECK ("skiplock"."pauses"."scope" in ('queue', 'kind'))
);
