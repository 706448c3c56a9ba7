/**
 * Governance (spec: capability 10; Endpoints, "Governance endpoints"; Limits): metering, the stored request
 * log, the audit trail, rate limits and quotas. Each is a part that adds rules to the front door
 * (src/http/FrontDoor.ts: admission policies, completion listeners) and handlers to the root route table
 * (`/_usage`, `/_requests`, `/_audit`, `/_audit/verify`); this module gathers the parts into the one
 * `Governance` service start-up installs. Nothing here runs per request: the parts' rules do.
 */
import { Context, Effect, Layer } from "effect"
import type { AppConfig } from "../config/AppConfig.ts"
import type { DoorRules } from "../http/FrontDoor.ts"
import type { RootHandler } from "../http/RootRoutes.ts"
import * as RateLimit from "./RateLimit.ts"
import * as Metering from "./Metering.ts"
import * as RequestLog from "./Requests.ts"
import * as AuditTrail from "./audit/AuditTrail.ts"
import { fromTrail, SecurityEvents } from "./audit/SecurityEvents.ts"
import * as Quota from "./Quota.ts"

/** `metering.*`, `request_log.*`, `audit.*`, `rate_limit.*`, `quota.*`, and whether `--smart` is on. */
export class GovernanceSettings extends Context.Tag("svc/governance/GovernanceSettings")<GovernanceSettings, {
  readonly metering: AppConfig["metering"]
  readonly requestLog: AppConfig["request_log"]
  readonly audit: AppConfig["audit"]
  readonly rateLimit: AppConfig["rate_limit"]
  readonly quota: AppConfig["quota"]
  /** Callers are known by tokens (`smart.enabled`): the governance endpoints need a scope. */
  readonly smart: boolean
  /** `server.public_url`: the base of the links the endpoints give; the request's Host without it. */
  readonly publicUrl?: string | undefined
}>() {}

export const settingsOf = (config: AppConfig): GovernanceSettings["Type"] => ({
  metering: config.metering,
  requestLog: config.request_log,
  audit: config.audit,
  rateLimit: config.rate_limit,
  quota: config.quota,
  smart: config.smart.enabled,
  publicUrl: config.server.public_url
})

/** What one part adds: rules for the front door, and handlers for root routes by their path in the table. */
export interface GovernanceRules extends DoorRules {
  readonly routes: Readonly<Record<string, RootHandler>>
}

export const noRules: GovernanceRules = { policies: [], listeners: [], routes: {} }

/** The rules of every part, in the order the parts are listed. */
export const combine = (parts: ReadonlyArray<GovernanceRules>): GovernanceRules => ({
  policies: parts.flatMap((part) => part.policies),
  listeners: parts.flatMap((part) => part.listeners),
  routes: Object.assign({}, ...parts.map((part) => part.routes))
})

export class Governance extends Context.Tag("svc/governance/Governance")<Governance, GovernanceRules>() {}

/**
 * The parts, each made from the settings and the services it needs (the database, the Writer); a part that
 * is switched off adds nothing. Admission runs the rate limit before the quota, so that a refused request
 * does not count against a quota. Beside the rules, the audit trail's recorder of the authorization server's
 * decisions (`SecurityEvents`, which records nothing when `audit.enabled` is false).
 */
export const layer = Layer.scopedContext(Effect.gen(function*() {
  const settings = yield* GovernanceSettings
  const parts: Array<GovernanceRules> = []
  // Quotas read metering's counts: it is made first, its rules come last.
  const metering = yield* Metering.make({ enabled: settings.metering.enabled, smart: settings.smart })
  parts.push(yield* RateLimit.rules(settings))
  parts.push(yield* Quota.rules(settings.quota, metering))
  parts.push(metering.rules)
  parts.push(yield* RequestLog.rules)
  const trail = yield* AuditTrail.make
  parts.push(trail.rules)
  return Context.make(Governance, combine(parts)).pipe(Context.add(SecurityEvents, fromTrail(trail)))
}))
