CREATE TABLE "skiplock"."console_logins" (
	"client" text PRIMARY KEY NOT NULL,
	"failures" integer NOT NULL,
	"window_started_at" timestamp with time zone NOT NULL,
	"blocked_until" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "skiplock"."console_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"who" text NOT NULL,
	"read_only" boolean NOT NULL,
	"csrf" text NOT NULL,
	"token_id" text NOT NULL,
	"client" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "console_sessions_expires_idx" ON "skiplock"."console_sessions" USING btree ("expires_at");