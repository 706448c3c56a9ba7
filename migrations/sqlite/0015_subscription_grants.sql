-- Subscriptions under SMART (docs/subscriptions.md, "Under --smart"): the grant of the token that last created or
-- updated each Subscription, whose matching keeps to what that grant may read. principal is the caller as JSON
-- (client, user, scopes, patient context); no secret.
CREATE TABLE svc_subscription_grants (
  id TEXT PRIMARY KEY,
  principal TEXT NOT NULL
);
