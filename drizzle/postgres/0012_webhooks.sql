CREATE TABLE "webhook_attempts" (
	"message_id" text NOT NULL,
	"n" integer NOT NULL,
	"at" bigint NOT NULL,
	"status" integer,
	"error" text,
	CONSTRAINT "webhook_attempts_message_id_n_pk" PRIMARY KEY("message_id","n")
);
--> statement-breakpoint
CREATE TABLE "webhook_endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"events" text NOT NULL,
	"description" text,
	"enabled" boolean DEFAULT true NOT NULL,
	"secret" text NOT NULL,
	"previous_secret" text,
	"previous_secret_until" bigint,
	"created_at" bigint NOT NULL,
	"failing_since" bigint
);
--> statement-breakpoint
CREATE TABLE "webhook_marks" (
	"mark" text PRIMARY KEY NOT NULL,
	"at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_messages" (
	"id" text PRIMARY KEY NOT NULL,
	"endpoint_id" text NOT NULL,
	"type" text NOT NULL,
	"body" text NOT NULL,
	"created_at" bigint NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" bigint,
	"settled_at" bigint
);
--> statement-breakpoint
ALTER TABLE "key_credits" ADD COLUMN "set_remaining" bigint;--> statement-breakpoint
ALTER TABLE "key_credits" ADD COLUMN "set_at" bigint;--> statement-breakpoint
CREATE INDEX "webhook_marks_at" ON "webhook_marks" USING btree ("at");--> statement-breakpoint
CREATE INDEX "webhook_messages_due" ON "webhook_messages" USING btree ("next_attempt_at") WHERE "webhook_messages"."next_attempt_at" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "webhook_messages_endpoint" ON "webhook_messages" USING btree ("endpoint_id","created_at");--> statement-breakpoint
CREATE INDEX "webhook_messages_settled" ON "webhook_messages" USING btree ("settled_at") WHERE "webhook_messages"."settled_at" IS NOT NULL;