/**
 * A version's meta changed in place, the write of `$meta-add` and `$meta-delete`
 * (https://hl7.org/fhir/R4/resource-operation-meta-add.html, -meta-delete.html): no new version is made, so
 * the version keeps its versionId, lastUpdated and commit timestamp, and history shows nothing new. In the
 * command's transaction: the version's stored text is rewritten, the change is noted in the change log
 * (`rewriteVersion`), and, when the version is the current one, the resource's search index rows are
 * replaced, so that `_tag`, `_security` and `_profile` searches find it by its new meta at once. The commit
 * publishes the change as an update of that same version (`inPlace`).
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { standing, unseen } from "../auth/access/enforce.ts"
import { after, writeRule } from "../auth/access/writes.ts"
import { paced } from "../db/EventLoop.ts"
import { fail, type FhirError, invalidResource } from "../http/FhirError.ts"
import { parseJson, stringifyJson } from "../json/Json.ts"
import { batchIndex, removeIndex } from "../search/IndexWriter.ts"
import { isValid, validateForWriteSteps } from "../validation/Validator.ts"
import { knownType } from "./checks.ts"
import { type CommandEnv, indexRows, settle } from "./commands.ts"
import { rewriteVersion } from "./versions.ts"

/** The meta of a version and what a change makes of it; undefined when the change leaves it as it is. */
export type MetaChange = (meta: Record<string, unknown>) => Record<string, unknown> | undefined

export interface MetaEdited {
  /** The version's meta after the change. */
  readonly meta: Record<string, unknown>
  readonly version: number
  /** Whether anything was written (a change that leaves the meta as it is writes nothing). */
  readonly changed: boolean
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Changes the meta of `type/id`, of its version `version` or (undefined) of its current one. Needs the `u`
 * permission on the type (403); under a restricted grant the resource as it is now must be inside it
 * (otherwise 404, as for a resource that does not exist) and, when the current version changes, still be
 * inside it afterwards (403, nothing written). 404 for an unknown resource or version, 410 for a deleted one.
 */
export const editMetaCommand = (
  env: CommandEnv,
  target: { readonly type: string; readonly id: string; readonly version: number | undefined },
  change: MetaChange
): Effect.Effect<MetaEdited, FhirError | SqlError> =>
  Effect.gen(function*() {
    const { type, id } = target
    const unknownType = knownType(env.catalog, type)
    if (unknownType !== undefined) return yield* unknownType
    const rule = yield* writeRule(env.access, env.catalog, type, "u")
    yield* settle(env)
    if (rule !== undefined && (yield* standing(env.sql, env.catalog, type, id, rule.rule)) !== "allowed") return yield* unseen(type, id)
    const [resource] = yield* env.sql<{ readonly rkey: number | string; readonly version: number | string }>`
      SELECT rkey, version FROM resources WHERE type = ${type} AND id = ${id}`
    if (resource === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    const rkey = Number(resource.rkey)
    const current = Number(resource.version)
    const version = target.version ?? current
    const [row] = yield* env.sql<{ readonly content: string | null }>`
      SELECT content FROM resource_versions WHERE rkey = ${rkey} AND version = ${version}`
    if (row === undefined) return yield* fail("not-found", `${type}/${id} has no version ${version}`)
    if (row.content === null) return yield* fail("deleted", `${type}/${id} was deleted (version ${version})`)
    const stored = parseJson(row.content) as Record<string, unknown>
    const meta = isRecord(stored["meta"]) ? stored["meta"] : {}
    const changed = change(meta)
    if (changed === undefined) return { meta, version, changed: false }
    // The parsed resource itself is changed, so that the texts of its decimals are kept (src/json/lexical.ts).
    stored["meta"] = changed
    // The meta is checked as a write checks it (a security label's code of a code system the server holds, ...);
    // the resource against the profiles the meta names is not: that is $validate's (docs/operations.md).
    const validation = yield* paced(env.pacer, validateForWriteSteps(stored, env.catalog, env.validation))
    const metaIssues = validation.issues.filter((issue) => issue.expression === `${type}.meta` || issue.expression.startsWith(`${type}.meta.`))
    if (!isValid(metaIssues)) return yield* invalidResource(`The meta of ${type}/${id}`, metaIssues)
    const content = stringifyJson(stored)
    yield* rewriteVersion(env.sql, { rkey, version, content, commitTs: env.commit.commitTs })
    if (version === current) {
      const rows = yield* indexRows(env, type, id, stored)
      yield* removeIndex(env.sql, rkey)
      batchIndex(env.writes, rkey, type, rows)
      if (rule !== undefined) yield* Effect.zipRight(settle(env), after(env.sql, env.catalog, type, id, rkey, [rule]))
    }
    env.commit.record({ type, id, version, op: "update", resource: content, inPlace: true })
    return { meta: changed, version, changed: true }
  })
