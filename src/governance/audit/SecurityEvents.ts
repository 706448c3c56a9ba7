/**
 * The authorization server's decisions in the audit trail (SMART App Launch 2.2; docs/governance.md, "Audit of
 * the authorization server"): sign-ins, consents, tokens issued and refused, revocations, client registrations
 * and EHR launch contexts, each one AuditEvent in the chain, the `/_audit` listing and the retention of the FHIR
 * requests' events (AuditTrail.ts).
 *
 * The codes are standard ones (FHIR R4 value sets audit-event-type and audit-event-sub-type, which take
 * DICOM PS3.16 CID 400 to 403; IHE BALP): a sign-in is DICOM 110114 User Authentication / 110122 Login, a
 * token request 110114 / IHE ITI-71 Get Access Token (as BALP's IUA profile records it), a revocation 110114 /
 * 110123 Logout, a consent 110113 Security Alert / BALP AuthZ-Consent, a registration 110113 / 110129 Security
 * Configuration, a launch context 110100 Application Activity / 110120 Application Start.
 *
 * A decision names who and what in plain terms (client id, user subject, fhirUser, scopes, patient): it is never
 * given a credential (token, code, secret, assertion, password, cookie, csrf value), and its event is made of what
 * it names, the request's address and its X-Request-Id, nothing else of the request.
 */
import { Context, Effect, Option } from "effect"
import { Admission } from "../../http/FrontDoor.ts"
import type { AuditTrail } from "./AuditTrail.ts"
import {
  type AuditEntity,
  type AuditEvent,
  agentType,
  type Coding,
  networkType,
  requestIdType,
  source,
  svcSystem,
  systemObject
} from "./events.ts"

export type DecisionKind = "sign-in" | "consent" | "token" | "revocation" | "registration" | "launch"

/** One decision of the authorization server, as its endpoint tells it. */
export interface SecurityDecision {
  readonly kind: DecisionKind
  /** `success` (outcome 0), `refused` (4: the request, or the user, was refused), `failed` (8: the server or the sign-in provider failed). */
  readonly outcome: "success" | "refused" | "failed"
  /** Why it was refused or failed, in the words the client or the user is told. */
  readonly reason?: string | undefined
  /**
   * Whether the requestor proved who it is: a client by its secret or signed assertion, a signed-in user, the
   * holder of the registration token. A refusal of one who did not is limited like the front door's refusals
   * with no known caller (`audit.unattributed_per_second`).
   */
  readonly known: boolean
  /** The client id: of the app asking (as it claimed to be, when it did not authenticate), or of the client registered. */
  readonly client?: string | undefined
  /** The user's subject. */
  readonly user?: string | undefined
  readonly fhirUser?: string | undefined
  readonly patient?: string | undefined
  readonly encounter?: string | undefined
  /** The scopes granted, or asked for when refused. */
  readonly scopes?: ReadonlyArray<string> | undefined
  /** Other plain facts by name: `grant_type`, `method`, `token_endpoint_auth_method`... */
  readonly details?: Readonly<Record<string, string | undefined>> | undefined
}

export class SecurityEvents extends Context.Tag("svc/governance/SecurityEvents")<SecurityEvents, {
  /** Records a decision taken while answering the current request (its address and X-Request-Id are the admission's). */
  readonly record: (decision: SecurityDecision) => Effect.Effect<void>
}>() {}

/** Records nothing: `audit.enabled` is false, or no trail is there. */
export const none: SecurityEvents["Type"] = { record: () => Effect.void }

const dcm = "http://dicom.nema.org/resources/ontology/DCM"
const userAuthentication: Coding = { system: dcm, code: "110114", display: "User Authentication" }
const securityAlert: Coding = { system: dcm, code: "110113", display: "Security Alert" }
const applicationActivity: Coding = { system: dcm, code: "110100", display: "Application Activity" }
const application = { coding: [{ system: dcm, code: "110150", display: "Application" }] }
const person: Coding = { system: "http://terminology.hl7.org/CodeSystem/audit-entity-type", code: "1", display: "Person" }
const patientRole: Coding = { system: "http://terminology.hl7.org/CodeSystem/object-role", code: "1", display: "Patient" }

interface Shape {
  readonly type: Coding
  readonly subtype: Coding
  readonly action: AuditEvent["action"]
  /** The endpoint that decides, the event's entity. */
  readonly endpoint: string
}

export const shapes: Readonly<Record<DecisionKind, Shape>> = {
  "sign-in": { type: userAuthentication, subtype: { system: dcm, code: "110122", display: "Login" }, action: "E", endpoint: "/auth/login" },
  consent: {
    type: securityAlert,
    subtype: { system: "https://profiles.ihe.net/ITI/BALP/CodeSystem/AuthZsubType", code: "AuthZ-Consent", display: "Authorization Decision using Roles and Consent" },
    action: "E",
    endpoint: "/auth/consent"
  },
  token: { type: userAuthentication, subtype: { system: "urn:ihe:event-type-code", code: "ITI-71", display: "Get Access Token" }, action: "E", endpoint: "/auth/token" },
  revocation: { type: userAuthentication, subtype: { system: dcm, code: "110123", display: "Logout" }, action: "E", endpoint: "/auth/revoke" },
  registration: { type: securityAlert, subtype: { system: dcm, code: "110129", display: "Security Configuration" }, action: "C", endpoint: "/auth/register" },
  launch: { type: applicationActivity, subtype: { system: dcm, code: "110120", display: "Application Start" }, action: "C", endpoint: "/auth/launch" }
}

/** The subtype codes (the rows' `kind`) of each type code these events use, for `/_audit?type=`. */
export const kindsOfType: Readonly<Record<string, ReadonlyArray<string>>> = Object.values(shapes).reduce<Record<string, Array<string>>>(
  (kinds, shape) => {
    ;(kinds[shape.type.code] ??= []).push(shape.subtype.code)
    return kinds
  },
  {}
)

/** Every subtype code of these events: what `/_audit?type=rest` leaves out. */
export const securityKinds: ReadonlyArray<string> = Object.values(shapes).map((shape) => shape.subtype.code)

/** Text from outside (a claimed client id, a grant type, scopes asked) kept to a bounded length. */
const clip = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

/** What the event takes from the request being answered. */
export interface RequestFacts {
  readonly timeMillis: number
  readonly address: string | undefined
  readonly requestId: string | undefined
}

/**
 * The AuditEvent of a decision. `agent[0]` is the requestor, known by a caller key as the FHIR requests' events
 * are (docs/governance.md, "Callers"): `client:<id>/user:<subject>` for a signed-in user of an app (the key its
 * token will give, so `/_audit?agent=` finds the sign-in, the consent, the token and the reads together), with
 * the fhirUser as `who.reference`; `client:<id>` for a client that authenticated; `address:<address>` for a
 * requestor who proved nothing, and for the holder of the registration token. The app, when one is named, is
 * `agent[1]` (DICOM 110150 Application). Entities: the patient of the launch context (`Patient/<id>`, so
 * `/_audit?entity=` finds it), the encounter, the endpoint with the facts of the decision as details (scope,
 * grant_type...), and the X-Request-Id.
 */
export const securityEvent = (decision: SecurityDecision, at: RequestFacts): AuditEvent => {
  const shape = shapes[decision.kind]
  const client = decision.client === undefined ? undefined : clip(decision.client, 200)
  const user = decision.user === undefined ? undefined : clip(decision.user, 200)
  const asClient = decision.known && client !== undefined && decision.kind !== "registration"
  const key = asClient ? `client:${client}${user === undefined || user === client ? "" : `/user:${user}`}` : `address:${at.address ?? "unknown"}`
  const agents: Array<AuditEvent["agent"][number]> = [{
    type: agentType,
    who: { ...(user !== undefined && decision.fhirUser !== undefined ? { reference: clip(decision.fhirUser, 200) } : {}), identifier: { value: key } },
    requestor: true,
    ...(at.address === undefined ? {} : { network: { address: at.address, type: networkType(at.address) } })
  }]
  if (client !== undefined && decision.kind !== "registration") agents.push({ type: application, who: { identifier: { value: client } }, requestor: false })

  const detail: Array<{ readonly type: string; readonly valueString: string }> = []
  if (decision.kind === "registration" && client !== undefined) detail.push({ type: "client_id", valueString: client })
  if (decision.scopes !== undefined && decision.scopes.length > 0) detail.push({ type: "scope", valueString: clip(decision.scopes.join(" "), 2000) })
  for (const [type, value] of Object.entries(decision.details ?? {})) {
    if (value !== undefined) detail.push({ type, valueString: clip(value, 200) })
  }
  const entities: Array<AuditEntity> = []
  if (decision.patient !== undefined) entities.push({ what: { reference: `Patient/${clip(decision.patient, 64)}` }, type: person, role: patientRole })
  if (decision.encounter !== undefined) entities.push({ what: { reference: `Encounter/${clip(decision.encounter, 64)}` }, type: systemObject })
  entities.push({ what: { identifier: { system: svcSystem, value: shape.endpoint } }, type: systemObject, ...(detail.length === 0 ? {} : { detail }) })
  if (at.requestId !== undefined) entities.push({ what: { identifier: { value: at.requestId } }, type: requestIdType })

  const outcome = decision.outcome === "success" ? "0" : decision.outcome === "refused" ? "4" : "8"
  return {
    resourceType: "AuditEvent",
    type: shape.type,
    subtype: [shape.subtype],
    action: shape.action,
    recorded: new Date(at.timeMillis).toISOString(),
    outcome,
    ...(outcome === "0" || decision.reason === undefined ? {} : { outcomeDesc: clip(decision.reason, 500) }),
    agent: agents,
    source,
    entity: entities
  }
}

/**
 * The recorder on a trail: the event is queued with the trail's buffer (no waiting on the request's path) and
 * appended in the trail's next batch. With `audit.enabled` false, `none`.
 */
export const fromTrail = (trail: Pick<AuditTrail, "enabled" | "record">): SecurityEvents["Type"] =>
  !trail.enabled ? none : {
    record: (decision) =>
      Effect.flatMap(Effect.serviceOption(Admission), (admission) =>
        Effect.sync(() => {
          const address = Option.isSome(admission) ? admission.value.client : undefined
          const requestId = Option.isSome(admission) ? admission.value.requestId : undefined
          trail.record(
            (timeMillis) => securityEvent(decision, { timeMillis, address, requestId }),
            decision.outcome !== "success" && !decision.known
          )
        }))
  }
