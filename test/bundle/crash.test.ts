/**
 * A transaction is all or nothing across a crash, as a user of the real `svc` command sees it: Synthea
 * bundles are POSTed one at a time to `svc --sqlite <file>`, and while one is in flight the process
 * is killed with SIGKILL. After a restart on the same file, every transaction that was answered is
 * there whole, and the one in flight is there whole or not at all. Three rounds, each killing at a
 * different moment (events, not delays): just after the request was handed to the socket, once its
 * whole body was taken by the server's socket, and once the database file changed after that. At least
 * one kill must land with a transaction in flight, as the client sees it: its whole body sent, no answer
 * begun, and none ever coming (the kill at "sent" does, every time: no server answers a few hundred
 * entries in the moment between taking the last byte and the client hearing it was taken).
 */
import { type FSWatcher, watch } from "node:fs"
import http from "node:http"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { type Running, startSvc, tempDir } from "../support/process.ts"
import { countByType, loadSynthea, skipSynthea, type SyntheaBundle, syntheaEnv } from "../support/synthea.ts"

const bundles: ReadonlyArray<SyntheaBundle> = skipSynthea ? [] : loadSynthea()
const types = [...countByType(bundles).keys()].sort()

interface Answer {
  readonly status: number
  readonly text: string
}

type Stage = "handed" | "sent" | "answering"

/**
 * POST `body` with node:http (whose events say how far the request got); `onProgress` hears
 * `"handed"` once the request is handed to the socket, `"sent"` once the whole body is, and
 * `"answering"` once the answer's status line and headers have come.
 */
const post = (url: string, body: string, onProgress: (stage: Stage) => void = () => {}): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const request = http.request(url, {
      method: "POST",
      headers: { "content-type": "application/fhir+json", "content-length": Buffer.byteLength(body), connection: "close" }
    }, (response) => {
      onProgress("answering")
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text }))
      response.on("error", reject)
    })
    request.on("error", reject)
    request.on("finish", () => onProgress("sent"))
    request.end(body)
    onProgress("handed")
  })

const getJson = async (url: string): Promise<{ readonly status: number; readonly json: any }> => {
  const response = await fetch(url, { headers: { accept: "application/fhir+json" } })
  const text = await response.text()
  return { status: response.status, json: text === "" ? undefined : JSON.parse(text) }
}

/** The `_history` total of each Synthea type and of the whole system: versions, one per created resource here. */
const totals = async (base: string): Promise<Record<string, number>> => {
  const counted: Record<string, number> = {}
  for (const type of [...types, ""]) {
    const reply = await getJson(`${base}${type === "" ? "" : `/${type}`}/_history?_count=1`)
    expect([type, reply.status]).toEqual([type, 200])
    counted[type === "" ? "(all)" : type] = reply.json.total
  }
  return counted
}

const difference = (after: Record<string, number>, before: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.keys(after).map((key) => [key, (after[key] ?? 0) - (before[key] ?? 0)]))

/** What `sent` adds to the totals when all of it is stored. */
const added = (sent: ReadonlyArray<SyntheaBundle>): Record<string, number> => {
  const counts: Record<string, number> = Object.fromEntries([...types, "(all)"].map((key) => [key, 0]))
  for (const { bundle } of sent) {
    for (const entry of bundle.entry) {
      counts[entry.resource.resourceType] = (counts[entry.resource.resourceType] ?? 0) + 1
      counts["(all)"] = (counts["(all)"] ?? 0) + 1
    }
  }
  return counts
}

/** The `location` of every entry of a transaction-response, as a URL under `base`. */
const locations = (base: string, answer: Answer): Array<string> => {
  const json = JSON.parse(answer.text)
  expect(json).toMatchObject({ resourceType: "Bundle", type: "transaction-response" })
  return json.entry.map((entry: { response?: { location?: string } }) => {
    const location = entry.response?.location ?? ""
    return location.startsWith("http") ? location : `${base}/${location}`
  })
}

type Trigger = "handed" | "sent" | "database written"
const triggers: ReadonlyArray<Trigger> = ["handed", "sent", "database written"]
/** Transactions answered in each round before the one that is cut short. */
const answeredPerRound = 2

describe.skipIf(skipRealPackages || skipSynthea)("a transaction cut short by SIGKILL (svc --sqlite, real R4 packages)", () => {
  const dir = tempDir()
  const running: Array<Running> = []
  afterAll(async () => {
    for (const server of running) await server.stop("SIGKILL")
    dir.remove()
  })

  it("keeps every answered transaction whole, and the one in flight whole or absent, across three kills and restarts", async () => {
    const file = join(dir.path, "svc.sqlite")
    const env = {
      SVC_CONFORMANCE_PACKAGE_REGISTRY: registryUrl ?? "",
      SVC_CONFORMANCE_PACKAGE_CACHE: realPackageCache,
      ...syntheaEnv
    }
    const start = async () => {
      const server = await startSvc(["--sqlite", file], { cwd: dir.path, env })
      running.push(server)
      await server.logged("serving")
      return server
    }
    // The largest bundles are the ones cut short (the longest in flight); the others are answered.
    const bySize = [...bundles].sort((a, b) => b.text.length - a.text.length)
    const cutShort = bySize.slice(0, triggers.length)
    const toAnswer = bySize.slice(triggers.length).reverse()

    let server = await start()
    const kills: Array<{ readonly trigger: Trigger; readonly landedInFlight: boolean }> = []
    const allAnswered: Array<{ readonly file: string; readonly urls: ReadonlyArray<string>; readonly base: string }> = []
    for (const [round, trigger] of triggers.entries()) {
      const base = `${server.url}/fhir`
      const before = await totals(base)
      const answered: Array<SyntheaBundle> = []
      for (const bundle of toAnswer.slice(round * answeredPerRound, (round + 1) * answeredPerRound)) {
        const answer = await post(base, bundle.text)
        expect([bundle.file, answer.status, answer.status === 200 ? "" : answer.text.slice(0, 300)]).toEqual([bundle.file, 200, ""])
        answered.push(bundle)
        allAnswered.push({ file: bundle.file, urls: locations(base, answer), base })
      }

      // The next one goes out, and the process is killed at the trigger, or when the answer comes first.
      const inFlight = cutShort[round]!
      const victim = server
      let killed: Promise<unknown> | undefined
      let watcher: FSWatcher | undefined
      const reached = new Set<Stage | "settled">()
      /** Whether, when the kill was sent, the whole body was out and nothing of an answer had come. */
      let inFlightAtKill = false
      const kill = () => {
        watcher?.close()
        if (killed !== undefined) return
        inFlightAtKill = reached.has("sent") && !reached.has("answering") && !reached.has("settled")
        killed = victim.stop("SIGKILL")
      }
      const outcome = post(base, inFlight.text, (stage) => {
        reached.add(stage)
        if (stage === trigger) kill()
        if (stage === "sent" && trigger === "database written") {
          watcher = watch(dir.path, (_event, name) => {
            if (name !== null && name.startsWith("svc.sqlite")) kill()
          })
        }
      }).then((answer) => answer, () => undefined).finally(() => reached.add("settled"))
      const answer = await outcome
      kill()
      await killed
      // An answer read after the kill was written before it: that kill came too late.
      kills.push({ trigger, landedInFlight: inFlightAtKill && answer === undefined })

      server = await start()
      const after = await totals(`${server.url}/fhir`)
      const seen = difference(after, before)
      if (answer !== undefined && answer.status === 200) {
        // The answer beat the kill: then it is an answered transaction like the others.
        allAnswered.push({ file: inFlight.file, urls: locations(base, answer), base })
        expect([trigger, seen]).toEqual([trigger, added([...answered, inFlight])])
      } else {
        expect([[trigger, added(answered)], [trigger, added([...answered, inFlight])]]).toContainEqual([trigger, seen])
      }
      const whole = seen["(all)"] === added([...answered, inFlight])["(all)"]
      console.log(`kill when ${trigger} (${kills.at(-1)?.landedInFlight === true ? "sent, not answered" : "not with the whole body sent and no answer"}): ` +
        `the transaction in flight (${inFlight.bundle.entry.length} entries) was ` +
        `${answer?.status === 200 ? "answered first" : whole ? "committed, its answer lost" : "not committed"}`)
    }

    // Every answered transaction reads back whole, through its locations, on the last restart's port.
    const base = `${server.url}/fhir`
    const missing: Array<string> = []
    for (const { file, urls, base: then } of allAnswered) {
      for (const url of urls) {
        const reply = await getJson(`${base}${url.slice(then.length)}`)
        if (reply.status !== 200) missing.push(`${file}: ${url.slice(then.length)} ${reply.status}`)
      }
    }
    expect(missing.slice(0, 10)).toEqual([])
    expect(allAnswered.length).toBeGreaterThanOrEqual(triggers.length * answeredPerRound)
    expect(kills).toContainEqual({ trigger: "sent", landedInFlight: true })
  }, 600_000)
})
