import { describe, expect, it } from "@effect/vitest"
import { clientAddress, makePeerList, parseCidr } from "../../src/http/ClientAddress.ts"

const noProxy = { hops: 0, peers: undefined }

describe("client address", () => {
  it("is the connection address when no proxy is trusted, whatever X-Forwarded-For says", () => {
    expect(clientAddress("10.0.0.9", "1.2.3.4", noProxy)).toBe("10.0.0.9")
  })

  it("shows an IPv4-mapped connection address as plain IPv4", () => {
    expect(clientAddress("::ffff:127.0.0.1", undefined, noProxy)).toBe("127.0.0.1")
  })

  it("takes the Nth entry from the right of X-Forwarded-For with N hops", () => {
    const header = "203.0.113.7, 198.51.100.2, 10.0.0.1"
    expect(clientAddress("10.0.0.2", header, { hops: 1, peers: undefined })).toBe("10.0.0.1")
    expect(clientAddress("10.0.0.2", header, { hops: 2, peers: undefined })).toBe("198.51.100.2")
    expect(clientAddress("10.0.0.2", header, { hops: 3, peers: undefined })).toBe("203.0.113.7")
  })

  it("takes the leftmost entry when the list is shorter than the hops", () => {
    expect(clientAddress("10.0.0.2", "203.0.113.7", { hops: 3, peers: undefined })).toBe("203.0.113.7")
  })

  it("believes X-Forwarded-For only from the trusted networks", () => {
    const trusted = { hops: 1, peers: makePeerList(["10.0.0.0/8", "::1/128"]) }
    expect(clientAddress("10.1.2.3", "203.0.113.7", trusted)).toBe("203.0.113.7")
    expect(clientAddress("::1", "203.0.113.7", trusted)).toBe("203.0.113.7")
    expect(clientAddress("192.0.2.50", "203.0.113.7", trusted)).toBe("192.0.2.50")
  })

  it("believes any peer when no networks are listed, and none of them when hops is 0", () => {
    expect(makePeerList([])).toBeUndefined()
    expect(clientAddress("192.0.2.50", "203.0.113.7", { hops: 1, peers: makePeerList([]) })).toBe("203.0.113.7")
  })

  it("does not believe an entry that is not an IP address", () => {
    expect(clientAddress("10.0.0.2", "evil, 10.0.0.1", { hops: 2, peers: undefined })).toBe("10.0.0.2")
  })

  it("reads CIDR networks of both families and refuses others", () => {
    expect(parseCidr("10.0.0.0/8")).toEqual({ address: "10.0.0.0", prefix: 8, family: "ipv4" })
    expect(parseCidr("2001:db8::/32")).toEqual({ address: "2001:db8::", prefix: 32, family: "ipv6" })
    expect(parseCidr("127.0.0.1")).toEqual({ address: "127.0.0.1", prefix: 32, family: "ipv4" })
    expect(parseCidr("10.0.0.0/33")).toBeUndefined()
    expect(parseCidr("example.org/8")).toBeUndefined()
  })
})
