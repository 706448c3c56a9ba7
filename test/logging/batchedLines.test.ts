/**
 * The log's lines written together (src/logging/Log.ts, `batchedLines`): those of one turn of the event loop in
 * one write after the turn, in their order, none lost, and at most `heldLines` held whatever the turn.
 */
import { describe, expect, it } from "@effect/vitest"
import { batchedLines } from "../../src/logging/Log.ts"

/** Resolves after the macrotasks queued before it (the batch's `setImmediate`). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("the log's lines", () => {
  it("go out together after the turn in which they were logged, in their order", async () => {
    const writes: Array<string> = []
    const lines = batchedLines((text) => void writes.push(text))
    lines.write("a\n")
    lines.write("b\n")
    lines.write("c\n")
    expect(writes).toEqual([])
    await nextTurn()
    expect(writes).toEqual(["a\nb\nc\n"])
    lines.write("d\n")
    await nextTurn()
    expect(writes).toEqual(["a\nb\nc\n", "d\n"])
  })

  it("are written at once when many gather in one turn, and when flushed", () => {
    const writes: Array<string> = []
    const lines = batchedLines((text) => void writes.push(text))
    for (let n = 0; n < 600; n++) lines.write(`${n}\n`)
    expect(writes.length).toBe(2)
    lines.flush()
    const all = writes.join("").split("\n").filter((line) => line !== "")
    expect(all).toEqual(Array.from({ length: 600 }, (_, n) => String(n)))
    lines.flush()
    expect(writes.length).toBe(3)
  })
})
