/**
 * HTML for the authorization server's pages (src/auth/pages.ts), escaped by construction. Every value put
 * into a page goes through `escapeHtml`, which makes text safe both between tags and inside a double-quoted
 * attribute value (HTML Living Standard, 13.1.2.3 "Attributes" and 13.1.3 "Text"): the `html` tag applies
 * it to each interpolated value unless that value is already `Html` made by the tag itself.
 */

const replacements: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;"
}

/**
 * `text` as HTML that shows exactly `text`, in element content or a quoted attribute value. `&` keeps a
 * character reference from being read, `<` a tag from starting, both quotes an attribute from ending, and
 * `>` is escaped too so that no reader of the markup mistakes it for the end of a tag.
 */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (character) => replacements[character]!)

/** Markup that is already safe: made only by `html` (or `Html.trusted` for constant markup). */
export class Html {
  private constructor(readonly markup: string) {}
  /** Markup written in this code base, never anything from a request or the database. */
  static trusted(markup: string): Html {
    return new Html(markup)
  }
  toString(): string {
    return this.markup
  }
}

/** What may be interpolated: text (escaped), markup made by `html`, lists of either, and nothing. */
export type Interpolation = string | number | Html | undefined | null | false | ReadonlyArray<Interpolation>

const render = (value: Interpolation): string => {
  if (value === undefined || value === null || value === false) return ""
  if (value instanceof Html) return value.markup
  if (typeof value === "number") return escapeHtml(String(value))
  if (typeof value === "string") return escapeHtml(value)
  return value.map(render).join("")
}

/** A template tag: the literal parts as written, every interpolated value escaped unless it is `Html`. */
export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Interpolation>): Html =>
  Html.trusted(strings.reduce((out, literal, i) => out + literal + (i < values.length ? render(values[i]!) : ""), ""))
