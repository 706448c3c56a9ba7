/**
 * What an authorization grants (SMART App Launch 2.2, "Obtain access token"): the one record behind an
 * authorization code, a refresh token and the access tokens issued from them. It is what the user consented
 * to (or what a backend client was allowed), with the launch context the token response reports.
 */
export interface Grant {
  /** The client the grant was made to. */
  readonly clientId: string
  /** The scopes granted, in the order asked for (the consent page may have removed some). */
  readonly scopes: ReadonlyArray<string>
  /** The signed-in user's subject (`sub`): undefined for a backend client (client_credentials). */
  readonly subject?: string | undefined
  /** The user as a FHIR resource, `Practitioner/123` or `Patient/456` (`fhirUser`). */
  readonly fhirUser?: string | undefined
  /** Launch context: the patient (id only) whose compartment bounds `patient/` scopes. */
  readonly patient?: string | undefined
  /** Launch context: the encounter (id only). */
  readonly encounter?: string | undefined
  readonly needPatientBanner?: boolean | undefined
  readonly smartStyleUrl?: string | undefined
  /** When the user signed in, in seconds since the epoch (`auth_time` of the id_token). */
  readonly authTime?: number | undefined
  /** The `nonce` of the authorization request, repeated in the id_token. */
  readonly nonce?: string | undefined
}

/** The claims of an access token svc issued, as a verified token gives them back. */
export interface AccessClaims {
  /** The token's id (`jti`), for revocation and audit. */
  readonly jti: string
  readonly clientId: string
  readonly scopes: ReadonlyArray<string>
  readonly subject: string | undefined
  readonly fhirUser: string | undefined
  readonly patient: string | undefined
  readonly encounter: string | undefined
  /** Expiry, seconds since the epoch. */
  readonly exp: number
  readonly iat: number
}
