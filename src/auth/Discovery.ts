/**
 * The discovery documents (SMART App Launch 2.2, "Conformance" / `.well-known/smart-configuration`; OpenID
 * Connect Discovery 1.0): every URL in them derives from the server's public origin (`server.public_url`, or
 * the listen address on loopback), which is also the issuer of svc's tokens; the FHIR base is the tokens'
 * audience.
 */

/** Where the authorization server is reached, from the public origin. */
export interface AuthUrls {
  /** The issuer: the public URL without a trailing slash (`https://fhir.example.org`). */
  readonly issuer: string
  /** The FHIR base, `[issuer]/fhir`: the audience of access tokens and the `aud` an app must ask for. */
  readonly fhirBase: string
  readonly authorize: string
  readonly token: string
  readonly register: string
  readonly introspect: string
  readonly revoke: string
  readonly jwks: string
  readonly login: string
  readonly loginCallback: string
  readonly picker: string
  readonly consent: string
  readonly launch: string
}

export const authUrls = (publicUrl: string): AuthUrls => {
  const issuer = publicUrl.replace(/\/+$/, "")
  const auth = `${issuer}/auth`
  return {
    issuer,
    fhirBase: `${issuer}/fhir`,
    authorize: `${auth}/authorize`,
    token: `${auth}/token`,
    register: `${auth}/register`,
    introspect: `${auth}/introspect`,
    revoke: `${auth}/revoke`,
    jwks: `${auth}/jwks`,
    login: `${auth}/login`,
    loginCallback: `${auth}/login/callback`,
    picker: `${auth}/picker`,
    consent: `${auth}/consent`,
    launch: `${auth}/launch`
  }
}

/** The SMART capabilities svc has (SMART App Launch 2.2, "Capabilities"). */
export const capabilities: ReadonlyArray<string> = [
  "launch-ehr",
  "launch-standalone",
  "authorize-post",
  "client-public",
  "client-confidential-symmetric",
  "client-confidential-asymmetric",
  "sso-openid-connect",
  "context-banner",
  "context-ehr-patient",
  "context-ehr-encounter",
  "context-standalone-patient",
  "permission-offline",
  "permission-online",
  "permission-patient",
  "permission-user",
  "permission-v1",
  "permission-v2"
]

/** Scopes advertised: every form svc understands (src/auth/scopes.ts), with wildcards as examples of the resource scopes. */
export const scopesSupported: ReadonlyArray<string> = [
  "openid",
  "fhirUser",
  "profile",
  "launch",
  "launch/patient",
  "launch/encounter",
  "offline_access",
  "online_access",
  "patient/*.read",
  "patient/*.write",
  "patient/*.*",
  "user/*.read",
  "user/*.write",
  "user/*.*",
  "system/*.read",
  "system/*.write",
  "system/*.*",
  "patient/*.cruds",
  "patient/*.rs",
  "user/*.cruds",
  "user/*.rs",
  "system/*.cruds",
  "system/*.rs"
]

const authMethods = ["client_secret_basic", "client_secret_post", "private_key_jwt"]
const assertionAlgs = ["RS384", "ES384"]
const grantTypes = ["authorization_code", "refresh_token", "client_credentials"]

/** `[base]/.well-known/smart-configuration`. */
export const smartConfiguration = (urls: AuthUrls) => ({
  issuer: urls.issuer,
  jwks_uri: urls.jwks,
  authorization_endpoint: urls.authorize,
  token_endpoint: urls.token,
  registration_endpoint: urls.register,
  introspection_endpoint: urls.introspect,
  revocation_endpoint: urls.revoke,
  token_endpoint_auth_methods_supported: authMethods,
  token_endpoint_auth_signing_alg_values_supported: assertionAlgs,
  grant_types_supported: grantTypes,
  scopes_supported: scopesSupported,
  response_types_supported: ["code"],
  code_challenge_methods_supported: ["S256"],
  capabilities
})

/** `/.well-known/openid-configuration`. */
export const openidConfiguration = (urls: AuthUrls) => ({
  issuer: urls.issuer,
  authorization_endpoint: urls.authorize,
  token_endpoint: urls.token,
  jwks_uri: urls.jwks,
  registration_endpoint: urls.register,
  introspection_endpoint: urls.introspect,
  revocation_endpoint: urls.revoke,
  scopes_supported: scopesSupported,
  response_types_supported: ["code"],
  response_modes_supported: ["query"],
  grant_types_supported: grantTypes,
  subject_types_supported: ["public"],
  id_token_signing_alg_values_supported: ["RS256"],
  token_endpoint_auth_methods_supported: authMethods,
  token_endpoint_auth_signing_alg_values_supported: assertionAlgs,
  code_challenge_methods_supported: ["S256"],
  claims_supported: ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "fhirUser", "name"]
})
