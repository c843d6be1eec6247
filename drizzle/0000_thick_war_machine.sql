CREATE TABLE `api_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`secret_hash` blob NOT NULL,
	`user_id` integer NOT NULL,
	`level` integer NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `api_keys_user_expires` ON `api_keys` (`user_id`,`expires_at`);--> statement-breakpoint
CREATE INDEX `api_keys_expires` ON `api_keys` (`expires_at`);