import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { backends } from "../support/backends.ts"
import { call, startServer } from "../support/server.ts"

const patient = { resourceType: "Patient", name: [{ family: "Audited" }] }

interface Entry {
  readonly resource: {
    readonly id: string
    readonly action: string
    readonly outcome: string
    readonly subtype: ReadonlyArray<{ readonly code: string }>
    readonly agent: ReadonlyArray<{ readonly who: { readonly identifier: { readonly value: string } }; readonly network?: { readonly address: string } }>
    readonly entity?: ReadonlyArray<{ readonly what?: { readonly reference?: string }; readonly query?: string }>
  }
}

const entries = (json: any): ReadonlyArray<Entry> => (json?.entry ?? []) as ReadonlyArray<Entry>
const codes = (json: any) => entries(json).map((entry) => entry.resource.subtype[0]!.code)

describe.each(backends.filter((backend) => backend.kind !== "memory"))("/_audit on $kind", ({ kind, skip }) => {
  it.scopedLive.skipIf(skip)("gives its links under server.public_url when it is set", () =>
    Effect.gen(function*() {
      const server = yield* startServer(kind, { server: { public_url: "https://fhir.example.org/base/" } })
      expect((yield* call("POST", `${server.base}/Patient`, { body: patient })).status).toBe(201)
      expect((yield* call("POST", `${server.base}/Patient`, { body: patient })).status).toBe(201)
      const page = yield* call("GET", `${server.url}/_audit?type=create&_count=1`)
      expect(page.status).toBe(200)
      const links = page.json.link as ReadonlyArray<{ relation: string; url: string }>
      expect(links.find((link) => link.relation === "self")?.url).toBe("https://fhir.example.org/base/_audit?type=create&_count=1")
      expect(links.find((link) => link.relation === "next")?.url).toMatch(/^https:\/\/fhir\.example\.org\/base\/_audit\?type=create&_count=1&_cursor=\d+$/)
    }))

  it.scopedLive.skipIf(skip)("serves changes, reads, searches, refusals and admin access as a searchset Bundle, newest first, with filters and paging", () =>
    Effect.gen(function*() {
      const server = yield* startServer(kind)
      const created = yield* call("POST", `${server.base}/Patient`, { body: patient })
      expect(created.status).toBe(201)
      const id = created.json.id as string
      expect((yield* call("PUT", `${server.base}/Patient/${id}`, { body: { ...patient, id, active: true } })).status).toBe(200)
      expect((yield* call("GET", `${server.base}/Patient/${id}`)).status).toBe(200)
      expect((yield* call("GET", `${server.base}/Patient?family=Audited`)).status).toBe(200)
      expect((yield* call("GET", `${server.base}/Patient/no-such-patient`)).status).toBe(404)

      const all = yield* call("GET", `${server.url}/_audit?date=ge2020-01-01`)
      expect(all.status).toBe(200)
      expect(all.headers.get("content-type")).toContain("application/fhir+json")
      expect(all.json).toMatchObject({ resourceType: "Bundle", type: "searchset" })
      expect(codes(all.json).slice(0, 5)).toEqual(["read", "search-type", "read", "update", "create"])
      const [notFound, search, read, update, create] = entries(all.json)
      expect(create!.resource).toMatchObject({ action: "C", outcome: "0" })
      expect(create!.resource.entity![0]!.what!.reference).toBe(`Patient/${id}/_history/1`)
      expect(create!.resource.agent[0]!.who.identifier.value).toBe("address:127.0.0.1")
      expect(create!.resource.agent[0]!.network!.address).toBe("127.0.0.1")
      expect(update!.resource.entity![0]!.what!.reference).toBe(`Patient/${id}/_history/2`)
      expect(read!.resource).toMatchObject({ action: "R", outcome: "0" })
      expect(Buffer.from(search!.resource.entity!.find((entity) => entity.query !== undefined)!.query!, "base64").toString()).toBe("family=Audited")
      expect(notFound!.resource.outcome).toBe("4")
      const ids = entries(all.json).map((entry) => Number(entry.resource.id))
      expect([...ids].sort((a, b) => b - a)).toEqual(ids)

      const byEntity = yield* call("GET", `${server.url}/_audit?entity=Patient/${id}`)
      expect(codes(byEntity.json)).toEqual(["read", "update", "create"])
      expect(codes((yield* call("GET", `${server.url}/_audit?entity=Patient/${id}&action=C`)).json)).toEqual(["create"])
      expect(codes((yield* call("GET", `${server.url}/_audit?type=update`)).json)).toEqual(["update"])
      expect(codes((yield* call("GET", `${server.url}/_audit?outcome=4&agent=127.0.0.1`)).json)).toEqual(["read"])
      expect(entries((yield* call("GET", `${server.url}/_audit?date=lt2020-01-01`)).json)).toEqual([])
      // Reading the trail is itself recorded.
      const admin = yield* call("GET", `${server.url}/_audit?type=admin`)
      expect(entries(admin.json).length).toBeGreaterThanOrEqual(6)

      // Pages of one, by the next link.
      const seen: Array<string> = []
      let next: string | undefined = `${server.url}/_audit?entity=Patient/${id}&_count=1`
      while (next !== undefined) {
        const page: any = (yield* call("GET", next)).json
        seen.push(...codes(page))
        next = (page.link as ReadonlyArray<{ relation: string; url: string }>).find((link) => link.relation === "next")?.url
      }
      expect(seen).toEqual(["read", "update", "create"])

      for (const [query, name] of [["date=yesterday", "date"], ["date=2024-13-01", "date"], ["action=X", "action"], ["outcome=3", "outcome"], ["_count=0", "_count"], ["entity=Patient", "entity"], ["agent=%00", "agent"], ["colour=red", "colour"]] as const) {
        const bad = yield* call("GET", `${server.url}/_audit?${query}`)
        expect([query, bad.status, bad.json?.resourceType]).toEqual([query, 400, "OperationOutcome"])
        expect(bad.json.issue[0].diagnostics).toContain(`parameter ${name}`)
      }

      const verified = yield* call("GET", `${server.url}/_audit/verify`)
      expect(verified.status).toBe(200)
      expect(verified.json).toMatchObject({ ok: true, first_problem: null })
      expect(verified.json.rows_checked).toBeGreaterThan(10)
    }), 120_000)

  it.scopedLive.skipIf(skip)("records a refused read whose path decodes to U+0000, and the chain still verifies", () =>
    Effect.gen(function*() {
      const server = yield* startServer(kind)
      expect((yield* call("GET", `${server.base}/%00/abc`)).status).toBe(400)
      expect((yield* call("GET", `${server.base}/Patient/a%00b`)).status).toBe(400)
      const all = yield* call("GET", `${server.url}/_audit?action=R`)
      expect(all.status).toBe(200)
      const refused = entries(all.json).filter((entry) => entry.resource.outcome === "4").map((entry) => entry.resource.entity?.find((e) => e.what?.reference !== undefined)?.what?.reference)
      expect(refused).toEqual(["Patient/a\u0000b", "\u0000/abc"])
      // Not an entity the filter takes (Type/id): refused by name, as any other.
      const filtered = yield* call("GET", `${server.url}/_audit?entity=Patient/a%00b`)
      expect([filtered.status, filtered.json?.resourceType]).toEqual([400, "OperationOutcome"])
      const verified = yield* call("GET", `${server.url}/_audit/verify`)
      expect(verified.json).toMatchObject({ ok: true, first_problem: null })
    }), 120_000)

  it.scopedLive.skipIf(skip)("with audit.reads = false records changes, refusals and admin access only", () =>
    Effect.gen(function*() {
      const server = yield* startServer(kind, { audit: { reads: false } })
      const created = yield* call("POST", `${server.base}/Patient`, { body: patient })
      const id = created.json.id as string
      yield* call("GET", `${server.base}/Patient/${id}`)
      yield* call("GET", `${server.base}/Patient?family=Audited`)
      yield* call("GET", `${server.base}/Patient/missing`)
      yield* call("GET", `${server.url}/_audit/verify`)
      const all = yield* call("GET", `${server.url}/_audit?date=ge2020-01-01`)
      expect(codes(all.json).slice(0, 3)).toEqual(["admin", "read", "create"])
      expect(entries(all.json)[1]!.resource.outcome).toBe("4")
    }), 120_000)

  it.scopedLive.skipIf(skip)("records the requests the rate limit refused at the front door, reads and writes alike", () =>
    Effect.gen(function*() {
      // Reads and writes cost 10 of a burst of 20, refilled at one unit a second: two requests pass.
      const server = yield* startServer(kind, {
        rate_limit: { requests_per_second: 1, burst: 20, cost: { read: 10, write: 10 } },
        audit: { unattributed_per_second: 0 },
        // The trail is read as another caller (by X-Forwarded-For), whose bucket is full.
        server: { trusted_proxy_hops: 1 }
      })
      const created = yield* call("POST", `${server.base}/Patient`, { body: patient })
      expect(created.status).toBe(201)
      const id = created.json.id as string
      expect((yield* call("GET", `${server.base}/Patient/${id}`)).status).toBe(200)
      expect((yield* call("GET", `${server.base}/Patient/${id}`)).status).toBe(429)
      expect((yield* call("POST", `${server.base}/Patient`, { body: patient })).status).toBe(429)
      const refused = yield* call("GET", `${server.url}/_audit?outcome=4`, { headers: { "x-forwarded-for": "10.9.9.9" } })
      expect(refused.status).toBe(200)
      const events = entries(refused.json).map((entry) => entry.resource as any)
      expect(events.map((event) => [event.subtype[0].code, event.action, event.outcomeDesc])).toEqual([
        ["create", "C", "POST /fhir/Patient: HTTP 429"],
        ["read", "R", `GET /fhir/Patient/${id}: HTTP 429`]
      ])
    }), 120_000)
})
