-- Written by hand (drizzle-kit generates no triggers), as on PostgreSQL: the database keeps the counter
-- in step itself, within the statement that writes api_keys, so rows written by any client are counted
-- too (an operator's import with sqlite3, say). A key never changes user, so only INSERT and DELETE
-- matter. SQLite triggers run per row; each touches one counter row by its primary key.
CREATE TRIGGER `api_keys_count_inserted` AFTER INSERT ON `api_keys` BEGIN
	INSERT INTO `user_key_counts` (`user_id`, `keys`) VALUES (NEW.`user_id`, 1)
		ON CONFLICT (`user_id`) DO UPDATE SET `keys` = `keys` + 1;
END;
--> statement-breakpoint
CREATE TRIGGER `api_keys_count_deleted` AFTER DELETE ON `api_keys` BEGIN
	UPDATE `user_key_counts` SET `keys` = `keys` - 1 WHERE `user_id` = OLD.`user_id`;
END;
--> statement-breakpoint
-- Counted again from the rows (in the migration's transaction, so no write comes between): until now
-- keygate's own code kept the counter, and a key written by anything else was not in it.
DELETE FROM `user_key_counts`;
--> statement-breakpoint
INSERT INTO `user_key_counts` (`user_id`, `keys`) SELECT `user_id`, count(*) FROM `api_keys` GROUP BY `user_id`;
