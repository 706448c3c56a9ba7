/**
 * R4 writes its regexes for Java, which takes escapes (`\/`, `\-`, `\'`) and lone brackets that
 * JavaScript's unicode mode refuses; the plain mode takes them. Single-line mode, as FHIRPath asks.
 * `matches` in R4's invariants is read as the reference validator reads it, against the whole string
 * (Java's String.matches): `name.matches('[A-Z]([A-Za-z0-9_]){0,254}')` means a whole name of that form.
 */
const compiled = new Map<string, RegExp>()

export const javaRegex = (source: string): RegExp => {
  let pattern = compiled.get(source)
  if (pattern !== undefined) return pattern
  const whole = `^(?:${source})$`
  try {
    pattern = new RegExp(whole, "su")
  } catch {
    pattern = new RegExp(whole, "s")
  }
  // Patterns come from definitions; a bound keeps computed ones from growing the map.
  if (compiled.size < 1000) compiled.set(source, pattern)
  return pattern
}
