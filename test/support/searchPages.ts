/** Reading a search's pages over HTTP as a client does: by the Bundle's `next` links. */
import { Effect } from "effect"
import { expect } from "vitest"
import { call, type Reply } from "./server.ts"

/** The ids of a searchset's matches (not its included resources), in the order served. */
export const matchIds = (bundle: any): Array<string> =>
  (bundle.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource.id)

/** Every page from `url` on by its `next` links (at most `maxPages`, each answered 200): the ids served, and the page sizes. */
export const pages = (url: string, headers: Record<string, string> = {}, maxPages = 20) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    const sizes: Array<number> = []
    let next: string | undefined = url
    while (next !== undefined && sizes.length < maxPages) {
      const reply: Reply = yield* call("GET", next, { headers })
      expect(reply.status).toBe(200)
      const page = matchIds(reply.json)
      ids.push(...page)
      sizes.push(page.length)
      next = (reply.json.link ?? []).find((link: any) => link.relation === "next")?.url
    }
    return { ids, sizes }
  })
