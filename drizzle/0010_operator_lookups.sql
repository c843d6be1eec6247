CREATE TABLE `key_creations` (
	`bucket` integer NOT NULL,
	`shard` integer DEFAULT 0 NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`bucket`, `shard`)
);
--> statement-breakpoint
CREATE TABLE `verification_counts` (
	`bucket` integer NOT NULL,
	`code` text NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`bucket`, `code`)
);
--> statement-breakpoint
CREATE INDEX `api_keys_created` ON `api_keys` (`created_at`,`id`);