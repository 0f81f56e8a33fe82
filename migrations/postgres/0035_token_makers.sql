-- Who made each API token: the staff user at the head of the chain that made it (signed in,
-- or through API tokens made by one, however deep: a token made by a token Ada made is
-- Ada's), and the API token that made it, when one did. Both null for a token made on the
-- command line (and for tokens made by such a token, but for the token that made them), and
-- for sign-in tokens, whose user_id says whose they are. disableUser and resetUserPassword
-- revoke the user's API tokens through it when asked.
ALTER TABLE tokens ADD COLUMN created_by_user_id TEXT;
ALTER TABLE tokens ADD COLUMN created_by_token_id TEXT;
-- Only the tokens with a maker: sign-in tokens, most of the table, add nothing to it.
CREATE INDEX tokens_by_maker ON tokens (practice_id, created_by_user_id)
    WHERE created_by_user_id IS NOT NULL;
-- Tokens made before: their maker as the audit log recorded it (createApiToken's row, written
-- in the token's own transaction), in one pass over the log's rows of no patient.
UPDATE tokens SET
    created_by_user_id = CASE WHEN made.actor_type = 'user' THEN made.actor_id END,
    created_by_token_id = CASE WHEN made.actor_type = 'token' THEN made.actor_id END
FROM (SELECT practice_id, resource_id, actor_type, actor_id FROM audit_events
      WHERE patient_id IS NULL AND resource_type = 'token' AND action = 'create'
        AND actor_type IN ('user', 'token')) AS made
WHERE tokens.practice_id = made.practice_id AND tokens.id = made.resource_id
  AND tokens.kind = 'api';
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
