/** Cycles through `count` values shared by every connection: each request takes the next one. */
export const rotation = (count: number): (() => number) => {
  let next = 0
  return () => {
    const value = next
    next = (next + 1) % count
    return value
  }
}
