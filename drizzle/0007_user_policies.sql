CREATE TABLE `user_credits` (
	`user_id` integer PRIMARY KEY NOT NULL,
	`remaining` integer NOT NULL,
	`refill_amount` integer,
	`refill_interval_ms` integer,
	`refilled_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `user_policies` (
	`user_id` integer PRIMARY KEY NOT NULL,
	`ratelimit_limit` integer,
	`ratelimit_duration` integer,
	`max_keys` integer,
	`max_level` integer
);
