-- Who made each API token: the staff user at the head of the chain that made it (signed in,
-- or through API tokens made by one, however deep: a token made by a token Ada made is
-- Ada's), and the API token that made it, when one did. Both null for a token made on the
-- command line (and for tokens made by such a token, but for the token that made them), and
-- for sign-in tokens, whose user_id says whose they are. disableUser and resetUserPassword
-- revoke the user's API tokens through it when asked.
ALTER TABLE tokens ADD COLUMN created_by_user_id TEXT;
ALTER TABLE tokens ADD COLUMN created_by_token_id TEXT;
CREATE INDEX tokens_by_maker ON tokens (practice_id, created_by_user_id);
-- Tokens made before: their maker as the audit log recorded it (createApiToken's row, written
-- in the token's own transaction; a row of no patient, reached through the index by patient).
UPDATE tokens SET
    created_by_user_id = (SELECT a.actor_id FROM audit_events a
        WHERE a.practice_id = tokens.practice_id AND a.patient_id IS NULL
          AND a.resource_type = 'token' AND a.resource_id = tokens.id
          AND a.action = 'create' AND a.actor_type = 'user' LIMIT 1),
    created_by_token_id = (SELECT a.actor_id FROM audit_events a
        WHERE a.practice_id = tokens.practice_id AND a.patient_id IS NULL
          AND a.resource_type = 'token' AND a.resource_id = tokens.id
          AND a.action = 'create' AND a.actor_type = 'token' LIMIT 1)
WHERE kind = 'api';
-- A token made by a token: the staff user of the token that made it, down the chain.
WITH RECURSIVE made (practice_id, id, root) AS (
    SELECT practice_id, id, created_by_user_id FROM tokens
    WHERE kind = 'api' AND created_by_user_id IS NOT NULL
    UNION ALL
    SELECT t.practice_id, t.id, m.root FROM tokens t
    JOIN made m ON m.practice_id = t.practice_id AND m.id = t.created_by_token_id
    WHERE t.kind = 'api'
)
UPDATE tokens SET created_by_user_id = (
    SELECT m.root FROM made m WHERE m.practice_id = tokens.practice_id AND m.id = tokens.id)
WHERE kind = 'api' AND created_by_token_id IS NOT NULL;
