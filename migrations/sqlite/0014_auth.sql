-- SMART App Launch (src/auth/): the authorization server's state. Times are milliseconds since the epoch.
-- Nothing here holds a secret in the clear but the signing keys' private halves: client secrets, codes and
-- refresh tokens are kept as SHA-256 hashes only.

-- Signing keys (JWK). The newest key not retired signs; every key not yet forgotten verifies, so that tokens
-- signed before a rotation stay valid until they expire. kid is the key's RFC 7638 thumbprint.
CREATE TABLE svc_auth_keys (
  kid TEXT PRIMARY KEY,
  alg TEXT NOT NULL,
  private_jwk TEXT NOT NULL,
  public_jwk TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  retired_at INTEGER
);

-- Registered clients (RFC 7591 metadata as JSON). secret_hash for a confidential symmetric client.
CREATE TABLE svc_auth_clients (
  client_id TEXT PRIMARY KEY,
  metadata TEXT NOT NULL,
  secret_hash TEXT,
  created_at INTEGER NOT NULL
);

-- Authorization requests between /auth/authorize and the code: the sign-in, picker and consent steps.
CREATE TABLE svc_auth_pending (
  id_hash TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX svc_auth_pending_expires ON svc_auth_pending (expires_at);

-- Authorization codes, single use: the grant they stand for, until redeemed or expired.
CREATE TABLE svc_auth_codes (
  code_hash TEXT PRIMARY KEY,
  grant_json TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX svc_auth_codes_expires ON svc_auth_codes (expires_at);

-- EHR launch contexts (the launch parameter of an EHR launch): patient, encounter and the like.
CREATE TABLE svc_auth_launches (
  launch_id TEXT PRIMARY KEY,
  context TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);

-- Refresh tokens, rotated on use. A family is every token rotated from one grant: a token used twice
-- revokes its family (a stolen token). expires_at is null for offline_access.
CREATE TABLE svc_auth_refresh (
  token_hash TEXT PRIMARY KEY,
  family TEXT NOT NULL,
  client_id TEXT NOT NULL,
  grant_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  used_at INTEGER,
  revoked_at INTEGER
);
CREATE INDEX svc_auth_refresh_family ON svc_auth_refresh (family);

-- Access tokens revoked before they expire (RFC 7009), by their jti.
CREATE TABLE svc_auth_revoked (
  jti TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
);

-- Client assertion ids seen (RFC 7523 jti), kept until the assertion expires: a replay is refused.
CREATE TABLE svc_auth_assertions (
  client_id TEXT NOT NULL,
  jti TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (client_id, jti)
);
