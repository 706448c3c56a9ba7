import { describe, expect, it } from "@effect/vitest"
import { parseJson, stringifyJson } from "../../src/json/Json.ts"
import { carryLexical, cloneJson, lexicalOf, markTree, setLexical, spliceLexical } from "../../src/json/lexical.ts"

/** Parsed and written again: the same text, byte for byte (for text as JSON.stringify would lay it out). */
const roundTrip = (text: string) => stringifyJson(parseJson(text))

describe("parseJson and stringifyJson", () => {
  it("keep the text of decimals with trailing zeros, exponents and -0", () => {
    for (const text of [
      `{"a":105.00}`,
      `{"a":-83.694710}`,
      `{"a":1.50E+3,"b":1e3,"c":1.0E-2,"d":1E-7,"e":2.500}`,
      `{"a":-0,"b":-0.0,"c":0.0,"d":0}`,
      `{"a":0.10000000000000000001,"b":12345678901234567890,"c":3.141592653589793238462643}`,
      `{"a":1e400}`
    ]) {
      expect(roundTrip(text)).toBe(text)
    }
  })

  it("give JSON.parse's values: numbers stay numbers", () => {
    const value = parseJson(`{"a":105.00,"b":[1.50,{"c":-0}],"d":"1.50"}`) as any
    expect(value).toEqual({ a: 105, b: [1.5, { c: -0 }], d: "1.50" })
    expect(typeof value.a).toBe("number")
    expect(Object.is(value.b[1].c, -0)).toBe(true)
  })

  it("keep texts in nested arrays and objects", () => {
    const text = `{"a":[[1.0,2],[3.10,[4.000,{"b":[5.50]}]]],"c":{"d":{"e":6.0}},"f":[]}`
    expect(roundTrip(text)).toBe(text)
  })

  it("leave canonical numbers and numbers inside strings alone", () => {
    const text = `{"a":"x: 1.50, [2.0","b":1.5,"c":100,"d":"1e3","e":": 0.10"}`
    const value = parseJson(text) as any
    expect(value.a).toBe("x: 1.50, [2.0")
    expect(value.e).toBe(": 0.10")
    expect(stringifyJson(value)).toBe(text)
  })

  it("tell numbers after strings with escaped quotes and backslashes from numbers inside them", () => {
    for (const text of [
      `{"a":"x\\": 1.50 ","b":2.50}`,
      `{"a":"\\\\","b":2.50}`,
      `{"a":"\\\\\\": 1.0 ,","b":[2.50]}`,
      `{"seed":"Person seed: 1416774286699354796 ","b":{"c":-0.0}}`
    ]) {
      expect(parseJson(text)).toEqual(JSON.parse(text))
      expect(roundTrip(text)).toBe(text)
    }
  })

  it("read strings with escapes as JSON.parse does", () => {
    const text = `{"a\\"b":"c\\\\\\"d\\u00e9\\n","v":1.10,"w":"\\\\"}`
    expect(parseJson(text)).toEqual(JSON.parse(text))
    expect(roundTrip(text)).toBe(JSON.stringify(JSON.parse(text)).replace(`"v":1.1`, `"v":1.10`))
  })

  it("take the last of duplicate keys, with its text or none", () => {
    expect(roundTrip(`{"a":1.50,"b":2,"a":3.0}`)).toBe(`{"a":3.0,"b":2}`)
    expect(roundTrip(`{"a":1.50,"b":2.0,"a":1.5}`)).toBe(`{"a":1.5,"b":2.0}`)
    expect(roundTrip(`{"a":1.50,"b":2.0,"a":"x"}`)).toBe(`{"a":"x","b":2.0}`)
    expect(roundTrip(`{"a":{"x":1.0},"a":{"y":2}}`)).toBe(`{"a":{"y":2}}`)
    const text = `{"b":1.0,"a":{"x":1.50},"b":[2.00]}`
    expect(parseJson(text)).toEqual(JSON.parse(text))
    expect(roundTrip(text)).toBe(`{"b":[2.00],"a":{"x":1.50}}`)
  })

  it("keep integer-like keys in JSON.parse's order, each with its own text", () => {
    const text = `{"b":1.10,"2":2.20,"1":1.00,"a":[0.0]}`
    expect(Object.keys(parseJson(text) as object)).toEqual(Object.keys(JSON.parse(text)))
    expect(roundTrip(text)).toBe(`{"1":1.00,"2":2.20,"b":1.10,"a":[0.0]}`)
  })

  it("keep __proto__ an ordinary member", () => {
    const text = `{"__proto__":{"x":1.0},"y":2.0}`
    const value = parseJson(text) as any
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
    expect(Object.keys(value)).toEqual(["__proto__", "y"])
    expect(roundTrip(text)).toBe(text)
  })

  it("accept whitespace anywhere JSON allows it, and write it as JSON.stringify does", () => {
    const text = ` {\n\t"a" : [ 1.0 , 2.50 ] ,\r\n "b" : { "c" : 3.0 } , "d" : [ ] , "e" : { } } `
    expect(roundTrip(text)).toBe(`{"a":[1.0,2.50],"b":{"c":3.0},"d":[],"e":{}}`)
  })

  it("indent as JSON.stringify does, with the texts kept", () => {
    const text = `{"a":[1.0,{"b":2.50,"c":[true,null,"x"]}],"d":{"e":{}},"f":[],"g":{"h":[1,{"i":2}]}}`
    const expected = JSON.stringify(JSON.parse(text), null, 2).replace("\"a\": [\n    1,", "\"a\": [\n    1.0,").replace("2.5", "2.50")
    expect(stringifyJson(parseJson(text), 2)).toBe(expected)
  })

  it("throw what JSON.parse throws on text that is not JSON", () => {
    expect(() => parseJson(`{"a":1.50,}`)).toThrow(SyntaxError)
    expect(() => parseJson(`{"a":01.5}`)).toThrow(SyntaxError)
    expect(() => parseJson(`{"a":"\u0001 1.0"}`)).toThrow(SyntaxError)
  })

  it("parse non-object values as JSON.parse does", () => {
    expect(parseJson("1.50")).toBe(1.5)
    expect(parseJson(`"1.50"`)).toBe("1.50")
    expect(roundTrip(`[1.50,[2.0]]`)).toBe(`[1.50,[2.0]]`)
  })

  it("write a changed number as JavaScript writes it, never with the old text", () => {
    const value = parseJson(`{"a":1.50,"b":[2.0,3.0],"c":-0}`) as any
    value.a = 1.25
    value.b[1] = 4
    value.c = 0
    expect(stringifyJson(value)).toBe(`{"a":1.25,"b":[2.0,4],"c":0}`)
    // An assignment that gives the same number back must say which text it means.
    value.a = 1.5
    setLexical(value, "a", "1.5")
    expect(stringifyJson(value)).toBe(`{"a":1.5,"b":[2.0,4],"c":0}`)
  })

  it("keep texts under a spread copy of the top level", () => {
    const value = parseJson(`{"x":{"a":1.50},"top":2.0}`) as any
    expect(stringifyJson({ ...value, id: "1" })).toBe(`{"x":{"a":1.50},"top":2,"id":"1"}`)
    expect(stringifyJson(carryLexical(value, { ...value, id: "1" }))).toBe(`{"x":{"a":1.50},"top":2.0,"id":"1"}`)
  })

  it("leave values without texts to JSON.stringify, toJSON included", () => {
    const date = new Date(0)
    expect(stringifyJson({ a: date, b: undefined, c: [undefined, () => 1] })).toBe(JSON.stringify({ a: date, b: undefined, c: [undefined, () => 1] }))
    expect(stringifyJson({ a: 1 }, 2)).toBe(JSON.stringify({ a: 1 }, null, 2))
  })
})

describe("recorded texts", () => {
  it("survive cloneJson, and the clone's changes do not reach the original", () => {
    const value = parseJson(`{"a":[1.0,{"b":2.50}],"__proto__":3.0}`) as any
    const copy = cloneJson(value)
    expect(stringifyJson(copy)).toBe(`{"a":[1.0,{"b":2.50}],"__proto__":3.0}`)
    copy.a[1].b = 7
    expect(stringifyJson(value)).toBe(`{"a":[1.0,{"b":2.50}],"__proto__":3.0}`)
  })

  it("follow array items across splices", () => {
    const value = parseJson(`{"a":[1.0,2.0,3.0]}`) as any
    spliceLexical(value.a, 0, 1, [])
    value.a.splice(0, 1)
    expect(stringifyJson(value)).toBe(`{"a":[2.0,3.0]}`)
    spliceLexical(value.a, 1, 0, ["2.00", undefined])
    value.a.splice(1, 0, 2, 9)
    expect(stringifyJson(value)).toBe(`{"a":[2.0,2.00,9,3.0]}`)
  })

  it("are found by markTree when set by hand deep down", () => {
    const value: any = { a: { b: [{ c: 1.5 }] } }
    setLexical(value.a.b[0], "c", "1.50")
    expect(lexicalOf(value.a.b[0], "c")).toBe("1.50")
    expect(stringifyJson(value)).toBe(`{"a":{"b":[{"c":1.5}]}}`)
    expect(markTree(value)).toBe(true)
    expect(stringifyJson(value)).toBe(`{"a":{"b":[{"c":1.50}]}}`)
  })
})

describe("parseJson on deep text", () => {
  it("gives the value without its number texts when nesting is too deep to read them, for the body check to refuse", () => {
    const depth = 50_000
    const value = parseJson(`${'{"a":'.repeat(depth)}1.50${"}".repeat(depth)}`) as Record<string, unknown>
    let level: unknown = value
    for (let i = 0; i < depth; i++) level = (level as Record<string, unknown>)["a"]
    expect(level).toBe(1.5)
  })
})
