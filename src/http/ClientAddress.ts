/**
 * The client address of a request: the connection's address, or an entry of X-Forwarded-For when the
 * server sits behind trusted proxies (spec: `server.trusted_proxy_hops`, `server.trusted_proxy_peers`).
 */
import { BlockList, isIP } from "node:net"

export interface TrustedProxies {
  /** Number of reverse proxies in front of the server; 0 ignores X-Forwarded-For. */
  readonly hops: number
  /** X-Forwarded-For is believed only on connections from these networks; undefined believes any peer. */
  readonly peers: BlockList | undefined
}

/** Strips the IPv4-mapped IPv6 prefix (`::ffff:127.0.0.1`) and brackets, so addresses compare as users write them. */
export const normaliseAddress = (address: string): string => {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)
  return mapped ? mapped[1]! : bare
}

/** Parses `a.b.c.d/n` or `x::y/n` (a bare address is a /32 or /128); undefined when it is not a network. */
export const parseCidr = (text: string): { readonly address: string; readonly prefix: number; readonly family: "ipv4" | "ipv6" } | undefined => {
  const [rawAddress, rawPrefix, ...rest] = text.trim().split("/")
  if (rawAddress === undefined || rest.length > 0) return undefined
  const address = normaliseAddress(rawAddress)
  const version = isIP(address)
  if (version === 0) return undefined
  const max = version === 4 ? 32 : 128
  if (rawPrefix !== undefined && !/^\d{1,3}$/.test(rawPrefix)) return undefined
  const prefix = rawPrefix === undefined ? max : Number(rawPrefix)
  if (prefix > max) return undefined
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" }
}

/**
 * Builds the peer list from CIDR strings; none (the default) believes any peer once hops is above 0.
 * Throws on an entry that is not a network (the configuration is validated first).
 */
export const makePeerList = (cidrs: ReadonlyArray<string> | undefined): BlockList | undefined => {
  if (cidrs === undefined || cidrs.length === 0) return undefined
  const list = new BlockList()
  for (const cidr of cidrs) {
    const parsed = parseCidr(cidr)
    if (parsed === undefined) throw new Error(`not a CIDR network: ${cidr}`)
    list.addSubnet(parsed.address, parsed.prefix, parsed.family)
  }
  return list
}

const peerIsTrusted = (peers: BlockList | undefined, peer: string): boolean => {
  if (peers === undefined) return true
  const version = isIP(peer)
  return version !== 0 && peers.check(peer, version === 4 ? "ipv4" : "ipv6")
}

/**
 * With N hops, the Nth entry from the right of X-Forwarded-For is the client. A list shorter than N
 * means fewer proxies handled this request: its leftmost entry, written by a trusted proxy, is the client.
 * An entry that is not an IP address is not believed.
 */
export const clientAddress = (
  connection: string | undefined,
  forwardedFor: string | undefined,
  trusted: TrustedProxies
): string => {
  const peer = connection === undefined ? "unknown" : normaliseAddress(connection)
  if (trusted.hops <= 0 || forwardedFor === undefined || !peerIsTrusted(trusted.peers, peer)) return peer
  const entries = forwardedFor.split(",").map((entry) => entry.trim()).filter((entry) => entry.length > 0)
  if (entries.length === 0) return peer
  const index = Math.max(0, entries.length - trusted.hops)
  const candidate = normaliseAddress(entries[index]!)
  return isIP(candidate) === 0 ? peer : candidate
}
