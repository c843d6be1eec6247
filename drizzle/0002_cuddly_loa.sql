CREATE TABLE `user_key_counts` (
	`user_id` integer PRIMARY KEY NOT NULL,
	`keys` integer NOT NULL
);
