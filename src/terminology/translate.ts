/**
 * A code translated through ConceptMaps (https://hl7.org/fhir/R4/conceptmap-operation-translate.html,
 * https://hl7.org/fhir/R4/conceptmap.html):
 * - forwards, a group whose `source` is the code's system (or states none) maps an element of that code to
 *   each of its targets, with the target's equivalence; `targetsystem` keeps the groups whose `target` is it;
 * - `reverse` reads the maps backwards: each element whose target is the code is a match, its equivalence
 *   turned round (`wider` is `narrower` seen from the other side, `subsumes` is `specializes`);
 * - a code a group has no element for takes the group's `unmapped` (forwards only): `provided` maps it to
 *   the same code in the target system (equivalence `equivalent`), `fixed` to the fixed code (`inexact`: a
 *   catch-all says less than a mapping of the code itself), `other-map` translates it with that map;
 * - a target's `dependsOn` is met by a `dependency` of the same element whose concept has the value; a target
 *   whose dependency is given with another value is no match; one whose dependency is not given is a match
 *   with a message naming what it depends on;
 * - `result` is true when a match's equivalence is neither `unmatched` nor `disjoint`.
 */
import type { ConceptMapDef, ConceptMapGroup, ConceptMapOtherElement, ConceptMapTarget } from "../catalog/definitions.ts"
import { coding as codingOf } from "./parameters.ts"

export interface TranslateCoding {
  readonly system: string
  readonly version: string | undefined
  readonly code: string
}

export interface Dependency {
  readonly element: string | undefined
  readonly codings: ReadonlyArray<{ readonly system: string | undefined; readonly code: string | undefined }>
}

export interface TranslateQuery {
  readonly codings: ReadonlyArray<TranslateCoding>
  readonly targetSystem: string | undefined
  readonly reverse: boolean
  readonly dependencies: ReadonlyArray<Dependency>
}

export interface Match {
  readonly equivalence: string
  readonly concept: Record<string, string> | undefined
  readonly product: ReadonlyArray<{ readonly element: string; readonly concept: Record<string, string> }>
  /** The url of the ConceptMap the match comes from. */
  readonly source: string
}

export interface Translation {
  readonly result: boolean
  readonly matches: ReadonlyArray<Match>
  readonly messages: ReadonlyArray<string>
}

/** The most maps one translation passes through by `other-map`. */
const maxOtherMaps = 5

const reversed: Readonly<Record<string, string>> = { wider: "narrower", narrower: "wider", subsumes: "specializes", specializes: "subsumes" }

const notAMatch = new Set(["unmatched", "disjoint"])

const valueText = (element: ConceptMapOtherElement): string => `${element.system === undefined ? "" : `${element.system}#`}${element.value}`

const productOf = (target: ConceptMapTarget): Match["product"] =>
  target.product.map((product) => ({ element: product.property, concept: codingOf({ system: product.system, code: product.value, display: product.display }) }))

interface Walk {
  readonly matches: Array<Match>
  readonly messages: Array<string>
  readonly otherMap: (url: string) => ConceptMapDef | undefined
}

/** Whether a target's `dependsOn` holds for the dependencies given: "met", "unknown" (not given) or "unmet". */
const dependsOnHolds = (target: ConceptMapTarget, dependencies: ReadonlyArray<Dependency>): { readonly holds: "met" | "unknown" | "unmet"; readonly missing: ReadonlyArray<ConceptMapOtherElement> } => {
  const missing: Array<ConceptMapOtherElement> = []
  for (const needed of target.dependsOn) {
    const given = dependencies.filter((dependency) => dependency.element === needed.property)
    if (given.length === 0) {
      missing.push(needed)
      continue
    }
    const met = given.some((dependency) => dependency.codings.some((coding) =>
      coding.code === needed.value && (needed.system === undefined || coding.system === undefined || coding.system === needed.system)))
    if (!met) return { holds: "unmet", missing: [] }
  }
  return { holds: missing.length === 0 ? "met" : "unknown", missing }
}

const forwardGroup = (map: ConceptMapDef, group: ConceptMapGroup, coding: TranslateCoding, query: TranslateQuery, walk: Walk, visited: ReadonlyArray<string>): void => {
  const elements = group.element.filter((element) => element.code === coding.code)
  const targetSystem = group.target
  for (const element of elements) {
    for (const target of element.target) {
      const dependsOn = dependsOnHolds(target, query.dependencies)
      if (dependsOn.holds === "unmet") continue
      if (dependsOn.holds === "unknown") {
        walk.messages.push(`The match of ${coding.system}#${coding.code} to ${targetSystem ?? ""}#${target.code ?? ""} in ${map.url} holds only where ${dependsOn.missing.map((needed) => `${needed.property} is ${valueText(needed)}`).join(" and ")}, which the request did not give (parameter 'dependency')`)
      }
      walk.matches.push({
        equivalence: target.equivalence,
        concept: target.code === undefined ? undefined : codingOf({ system: targetSystem, version: group.targetVersion, code: target.code, display: target.display }),
        product: productOf(target),
        source: map.url
      })
    }
  }
  const unmapped = group.unmapped
  if (elements.length > 0 || unmapped === undefined) return
  switch (unmapped.mode) {
    case "provided":
      walk.matches.push({ equivalence: "equivalent", concept: codingOf({ system: targetSystem, version: group.targetVersion, code: coding.code }), product: [], source: map.url })
      walk.messages.push(`${coding.system}#${coding.code} is not mapped in ${map.url}: its group maps unmapped codes to the same code (unmapped mode 'provided')`)
      break
    case "fixed":
      if (unmapped.code === undefined) break
      walk.matches.push({
        equivalence: "inexact",
        concept: codingOf({ system: targetSystem, version: group.targetVersion, code: unmapped.code, display: unmapped.display }),
        product: [],
        source: map.url
      })
      walk.messages.push(`${coding.system}#${coding.code} is not mapped in ${map.url}: its group maps every unmapped code to ${unmapped.code} (unmapped mode 'fixed')`)
      break
    case "other-map": {
      const other = unmapped.url === undefined ? undefined : walk.otherMap(unmapped.url)
      if (other === undefined) {
        walk.messages.push(`${coding.system}#${coding.code} is not mapped in ${map.url}, which sends unmapped codes to the ConceptMap ${unmapped.url ?? "(no url)"}: this server does not hold it`)
      } else if (visited.includes(other.url) || visited.length >= maxOtherMaps) {
        walk.messages.push(`The ConceptMap ${map.url} sends unmapped codes to ${other.url}, which was not followed: the maps send them round in a circle or too far`)
      } else {
        forward(other, coding, query, walk, [...visited, other.url])
      }
      break
    }
  }
}

function forward(map: ConceptMapDef, coding: TranslateCoding, query: TranslateQuery, walk: Walk, visited: ReadonlyArray<string>): void {
  for (const group of map.groups) {
    if (group.source !== undefined && group.source !== coding.system) continue
    if (coding.version !== undefined && group.sourceVersion !== undefined && group.sourceVersion !== coding.version) continue
    if (query.targetSystem !== undefined && group.target !== query.targetSystem) continue
    forwardGroup(map, group, coding, query, walk, visited)
  }
}

const backward = (map: ConceptMapDef, coding: TranslateCoding, query: TranslateQuery, walk: Walk): void => {
  for (const group of map.groups) {
    if (group.target !== undefined && group.target !== coding.system) continue
    if (coding.version !== undefined && group.targetVersion !== undefined && group.targetVersion !== coding.version) continue
    if (query.targetSystem !== undefined && group.source !== query.targetSystem) continue
    for (const element of group.element) {
      if (element.code === undefined) continue
      for (const target of element.target) {
        if (target.code !== coding.code) continue
        if (target.dependsOn.length > 0) {
          walk.messages.push(`The mapping of ${group.source ?? ""}#${element.code} to ${coding.code} in ${map.url} holds only where ${target.dependsOn.map((needed) => `${needed.property} is ${valueText(needed)}`).join(" and ")}`)
        }
        walk.matches.push({
          equivalence: reversed[target.equivalence] ?? target.equivalence,
          concept: codingOf({ system: group.source, version: group.sourceVersion, code: element.code, display: element.display }),
          product: [],
          source: map.url
        })
      }
    }
  }
}

/** The codings of `query` translated with `maps`; `otherMap` finds the map an `other-map` group names. */
export const translate = (maps: ReadonlyArray<ConceptMapDef>, query: TranslateQuery, otherMap: (url: string) => ConceptMapDef | undefined): Translation => {
  const walk: Walk = { matches: [], messages: [], otherMap }
  for (const coding of query.codings) {
    for (const map of maps) {
      if (query.reverse) backward(map, coding, query, walk)
      else forward(map, coding, query, walk, [map.url])
    }
  }
  const result = walk.matches.some((match) => !notAMatch.has(match.equivalence))
  if (walk.matches.length === 0) {
    const codes = query.codings.map((coding) => `${coding.system}#${coding.code}`).join(", ")
    const to = query.targetSystem === undefined ? "" : ` to the code system ${query.targetSystem}`
    walk.messages.unshift(maps.length === 0
      ? `No ConceptMap this server holds applies to ${codes}${to} (by the source and target value sets asked for and the code's system)`
      : `No ${query.reverse ? "reverse " : ""}mapping of ${codes} was found in ${maps.length === 1 ? `the ConceptMap ${maps[0]!.url}` : `the ${maps.length} ConceptMaps that apply`}${to}`)
  } else if (!result) {
    walk.messages.unshift("The maps say that no concept matches (equivalence unmatched or disjoint)")
  }
  return { result, matches: walk.matches, messages: walk.messages }
}
