/**
 * `$validate` (https://hl7.org/fhir/R4/resource-operation-validate.html) at type and instance level:
 * `POST [base]/{type}/$validate` and `POST [base]/{type}/{id}/$validate`, the resource in the body or as
 * the `resource` parameter of a Parameters body, with `mode` (create, update, delete, profile) and
 * `profile` as parameters of the body or the URL. On `Parameters/$validate` a Parameters body may be either
 * (`isOperationInput`). The answer is an OperationOutcome with every issue, and
 * 200 whether or not the resource is valid, as FHIR says. A write would check the same: the structure
 * definitions, the profiles named, and the references under `conformance.reference_policy`.
 */
import { Clock, Effect } from "effect"
import { granted, standing, unseen } from "../auth/access/enforce.ts"
import type { Permission } from "../auth/scopes.ts"
import { Database } from "../db/Database.ts"
import { type Issue as OutcomeIssue } from "../http/OperationOutcome.ts"
import { readCurrent } from "../store/reads.ts"
import { referenceCheck } from "../validation/referencePolicy.ts"
import { isValid, type Issue, validateForWrite, validateResource } from "../validation/Validator.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { readResource } from "../rest/RequestBody.ts"
import { StoreSettings, validationOptions } from "../store/ResourceStore.ts"
import { resourceBody } from "../rest/respond.ts"
import type { OperationModule } from "./Operation.ts"

const modes = ["create", "update", "delete", "profile"] as const
type Mode = (typeof modes)[number]

interface Input {
  readonly resource: Record<string, unknown> | undefined
  readonly mode: Mode | undefined
  readonly profile: string | undefined
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const operationParameters = new Set(["resource", "mode", "profile"])

/**
 * Whether a Parameters body is the operation's input rather than the resource to validate. On any type but
 * Parameters it is the input. On `Parameters/$validate` it is the input when it has parameters and each is
 * named `resource`, `mode` or `profile`; any other Parameters is the resource to validate (a Parameters
 * made only of such parameters is validated by sending it as the `resource` parameter).
 */
const isOperationInput = (type: string, body: Record<string, unknown>): boolean => {
  if (body["resourceType"] !== "Parameters") return false
  if (type !== "Parameters") return true
  const parameters = body["parameter"]
  return Array.isArray(parameters) && parameters.length > 0 &&
    parameters.every((parameter) => isRecord(parameter) && typeof parameter["name"] === "string" && operationParameters.has(parameter["name"]))
}

/** The operation's parameters from a Parameters body (if it is the operation's input) and the URL; the body wins. */
const inputOf = (request: FhirRequest, type: string, body: Record<string, unknown> | undefined) =>
  Effect.gen(function*() {
    let resource: Record<string, unknown> | undefined = body
    let mode = request.params.get("mode") ?? undefined
    let profile = request.params.get("profile") ?? undefined
    if (body !== undefined && isOperationInput(type, body)) {
      resource = undefined
      const parameters = Array.isArray(body["parameter"]) ? body["parameter"] : []
      for (const parameter of parameters) {
        if (!isRecord(parameter)) continue
        if (parameter["name"] === "resource") {
          if (!isRecord(parameter["resource"])) return yield* fail("invalid", "the parameter 'resource' of $validate carries no resource")
          resource = parameter["resource"]
        } else if (parameter["name"] === "mode" && typeof parameter["valueCode"] === "string") mode = parameter["valueCode"]
        else if (parameter["name"] === "profile" && typeof parameter["valueUri"] === "string") profile = parameter["valueUri"]
        else if (parameter["name"] === "profile" && typeof parameter["valueCanonical"] === "string") profile = parameter["valueCanonical"]
      }
    }
    if (mode !== undefined && !(modes as ReadonlyArray<string>).includes(mode)) {
      return yield* fail("invalid", `The mode '${mode}' of $validate is not one of ${modes.join(", ")}`)
    }
    return { resource, mode: mode as Mode | undefined, profile } satisfies Input
  })

const toOutcome = (issues: ReadonlyArray<Issue>): ReadonlyArray<OutcomeIssue & { readonly expression?: ReadonlyArray<string> }> =>
  issues.length === 0
    ? [{ severity: "information", code: "informational", diagnostics: "No issues: the resource is valid" }]
    : issues.map((issue) => ({
      severity: issue.severity,
      code: issue.code as OutcomeIssue["code"],
      diagnostics: issue.diagnostics,
      ...(issue.expression === "" ? {} : { expression: [issue.expression] })
    }))

const answer = (request: FhirRequest, issues: ReadonlyArray<Issue>) =>
  resourceBody({ resourceType: "OperationOutcome", issue: toOutcome(issues) }, request.negotiated, request.catalog)

/** `$validate` on `type`, and on the instance `id` when given. */
export const validateOperation = (request: FhirRequest, type: string, id: string | undefined) =>
  Effect.gen(function*() {
    const contentLength = Number(request.http.headers["content-length"] ?? "0")
    const hasBody = contentLength > 0 || request.http.headers["transfer-encoding"] !== undefined
    const body = hasBody ? yield* readResource(request.http, request.maxBodyBytes, request.catalog) : undefined
    const input = yield* inputOf(request, type, body)
    const db = yield* Database
    // Checked as the interaction its mode stands for (docs/smart.md, "Scopes"): the permission on the type, and an
    // instance the caller cannot see is not known.
    const permission: Permission = input.mode === "create" ? "c" : input.mode === "update" ? "u" : input.mode === "delete" ? "d"
      : input.mode === "profile" ? "r" : id === undefined ? "c" : "u"
    const rule = yield* granted(request.access, request.catalog, type, permission)
    if (id !== undefined && (yield* db.withReader((sql) => standing(sql, request.catalog, type, id, rule))) === "outside") return yield* unseen(type, id)

    if (input.mode === "delete") {
      if (id === undefined) return yield* fail("invalid", "$validate with mode delete needs an instance: POST [base]/{type}/{id}/$validate")
      const current = yield* db.withReader((sql) => readCurrent(sql, type, id))
      if (current === undefined || current.content === null) return yield* fail("not-found", `${type}/${id} is not known`)
      return answer(request, [])
    }

    const resource = input.resource
    if (resource === undefined) return yield* fail("required", "$validate needs a resource: in the body, or as the parameter 'resource' of a Parameters body")
    if (resource["resourceType"] !== type) {
      return yield* fail("invalid", `$validate on ${type} was given a ${String(resource["resourceType"] ?? "body without resourceType")}`)
    }
    const extra: Array<Issue> = []
    if (input.mode === "update") {
      if (id === undefined) return yield* fail("invalid", "$validate with mode update needs an instance: POST [base]/{type}/{id}/$validate")
      if (resource["id"] !== id) extra.push({ severity: "error", code: "invalid", expression: `${type}.id`, diagnostics: `For an update of ${type}/${id} the resource's id must be '${id}'` })
    } else if (id !== undefined && resource["id"] !== undefined && resource["id"] !== id) {
      extra.push({ severity: "error", code: "invalid", expression: `${type}.id`, diagnostics: `The resource's id '${String(resource["id"])}' is not the instance's '${id}'` })
    }

    const profiles = input.profile === undefined ? [] : [input.profile]
    const settings = yield* StoreSettings
    const options = validationOptions(settings, yield* Clock.currentTimeMillis)
    const validation = validateForWrite(resource, request.catalog, options)
    const issues = profiles.length === 0 ? [...validation.issues] : [...validateResource(resource, request.catalog, { ...options, profiles })]
    // The references are checked as a write would check them, once the resource itself is valid.
    if (isValid(issues) && input.mode !== "profile") {
      const check = referenceCheck(settings.referencePolicy, request.base, request.catalog)
      check.add(id === undefined ? type : `${type}/${id}`, validation.references)
      issues.push(...(yield* db.withReader((sql) => check.verify(sql))))
    }
    return answer(request, [...extra, ...issues])
  })

export const validateModule = {
  name: "validate",
  levels: ["type", "instance"],
  types: undefined,
  definition: () => "http://hl7.org/fhir/OperationDefinition/Resource-validate",
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => validateOperation(call.request, call.type!, call.id)
} satisfies OperationModule<ReturnType<typeof validateOperation>>
