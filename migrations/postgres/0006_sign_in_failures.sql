-- Sign-in throttling, shared by every instance of a database: the failed sign-ins per email
-- and per client address. An attempt is counted before its password is checked, so that
-- guesses sent at once cannot all slip through; a success takes its count back. Not kept per
-- practice: signIn names none, and an unknown email is counted like a known one.
CREATE TABLE sign_in_failures (
    subject        TEXT    NOT NULL PRIMARY KEY,  -- 'email:ada@example.com' or 'address:192.0.2.1'
    failures       BIGINT  NOT NULL,
    last_at        BIGINT  NOT NULL,
    blocked_until  BIGINT                         -- NULL while under the free failures
);
CREATE INDEX sign_in_failures_by_time ON sign_in_failures (last_at);
