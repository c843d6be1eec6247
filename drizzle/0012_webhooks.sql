CREATE TABLE `webhook_attempts` (
	`message_id` text NOT NULL,
	`n` integer NOT NULL,
	`at` integer NOT NULL,
	`status` integer,
	`error` text,
	PRIMARY KEY(`message_id`, `n`)
);
--> statement-breakpoint
CREATE TABLE `webhook_endpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`events` text NOT NULL,
	`description` text,
	`enabled` integer DEFAULT true NOT NULL,
	`secret` text NOT NULL,
	`previous_secret` text,
	`previous_secret_until` integer,
	`created_at` integer NOT NULL,
	`failing_since` integer
);
--> statement-breakpoint
CREATE TABLE `webhook_marks` (
	`mark` text PRIMARY KEY NOT NULL,
	`at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `webhook_marks_at` ON `webhook_marks` (`at`);--> statement-breakpoint
CREATE TABLE `webhook_messages` (
	`id` text PRIMARY KEY NOT NULL,
	`endpoint_id` text NOT NULL,
	`type` text NOT NULL,
	`body` text NOT NULL,
	`created_at` integer NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`settled_at` integer
);
--> statement-breakpoint
CREATE INDEX `webhook_messages_due` ON `webhook_messages` (`next_attempt_at`) WHERE "webhook_messages"."next_attempt_at" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `webhook_messages_endpoint` ON `webhook_messages` (`endpoint_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `webhook_messages_settled` ON `webhook_messages` (`settled_at`) WHERE "webhook_messages"."settled_at" IS NOT NULL;--> statement-breakpoint
ALTER TABLE `key_credits` ADD `set_remaining` integer;--> statement-breakpoint
ALTER TABLE `key_credits` ADD `set_at` integer;