CREATE TABLE `key_credits` (
	`lineage` text PRIMARY KEY NOT NULL,
	`remaining` integer NOT NULL,
	`refill_amount` integer,
	`refill_interval_ms` integer,
	`refilled_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `key_usage` (
	`key_id` text NOT NULL,
	`bucket` integer NOT NULL,
	`valid` integer DEFAULT 0 NOT NULL,
	`rate_limited` integer DEFAULT 0 NOT NULL,
	`usage_exceeded` integer DEFAULT 0 NOT NULL,
	`denied` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`key_id`, `bucket`)
);
--> statement-breakpoint
CREATE INDEX `key_usage_bucket` ON `key_usage` (`bucket`);--> statement-breakpoint
CREATE TABLE `settings` (
	`name` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `subjects` (
	`user_id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`issuer` text NOT NULL,
	`subject` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `subjects_issuer_subject` ON `subjects` (`issuer`,`subject`);--> statement-breakpoint
ALTER TABLE `api_keys` ADD `lineage` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `rotated_at` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `enabled` integer DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `meta` text;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `ratelimit_limit` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `ratelimit_duration` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `last_used_at` integer;--> statement-breakpoint
CREATE INDEX `api_keys_lineage` ON `api_keys` (`lineage`) WHERE "api_keys"."lineage" IS NOT NULL;