-- Patient search per practice: on PostgreSQL the trigram index (0005) is led by practice_id
-- already, and reads one practice's entries. Nothing to change; this file keeps the two
-- engines' migrations in step.
SELECT 1;
