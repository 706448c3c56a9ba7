/**
 * FHIR GraphQL's way of writing argument values (https://hl7.org/fhir/R4/graphql.html, "Searching resources" and
 * "Field Arguments"): a code or an id is written as a bare name (`ConditionList(clinical_status: relapse)`,
 * `name(use: official)`), and alternatives of a search parameter as a list (`PatientList(_id: [1, 2, example])`,
 * ORed). The arguments are `String` in the schema, so that a client's `String` variables fit them; before a query
 * is validated, such literals in a `String` or `ID` argument are rewritten as the strings they stand for:
 *
 * - a bare name, a number or a boolean becomes its text;
 * - a list of them, in an argument of a search (`TypeList`, `TypeConnection`), becomes the values joined by `,`,
 *   each `,`, `$` and `|` in a value escaped with `\` as a search URL writes it (FHIR search, "Escaping"), which
 *   is how a search reads alternatives.
 *
 * Anything else (a variable, an object, a list holding a variable) is left for validation to judge.
 *
 * And a reference's `resource(type: Patient) { birthDate }` (FHIR GraphQL, "Resource references") selects fields
 * of that type directly: its fields are put in a fragment on the type (`{ ... on Patient { birthDate } }`), which
 * is how the `Resource` union is selected from.
 */
import {
  type ArgumentNode,
  type DocumentNode,
  getNullableType,
  GraphQLID,
  GraphQLString,
  type GraphQLSchema,
  type FieldNode,
  isObjectType,
  Kind,
  type SelectionNode,
  TypeInfo,
  type ValueNode,
  visit,
  visitWithTypeInfo
} from "graphql"

/** The text of a bare name, number or boolean literal; undefined for anything else. */
const scalarText = (value: ValueNode): string | undefined => {
  switch (value.kind) {
    case Kind.ENUM:
    case Kind.INT:
    case Kind.FLOAT:
      return value.value
    case Kind.BOOLEAN:
      return String(value.value)
    case Kind.STRING:
      return value.value
    default:
      return undefined
  }
}

/** `a,b\,c`: the alternatives of a search parameter as a search URL writes them. */
const searchAlternatives = (values: ReadonlyArray<string>): string => values.map((value) => value.replace(/[\\,$|]/g, (c) => `\\${c}`)).join(",")

/** Whether `name` is a field that searches (`PatientList`, `ObservationConnection`), whose arguments take alternatives. */
const searches = (name: string): boolean => /^[A-Z][A-Za-z0-9]*(List|Connection)$/.test(name)

/** The document with FHIR GraphQL's literals in `String` and `ID` arguments written as strings (see above). */
export const fhirLiterals = (schema: GraphQLSchema, document: DocumentNode): DocumentNode => {
  const typeInfo = new TypeInfo(schema)
  return visit(document, visitWithTypeInfo(typeInfo, {
    Field: {
      enter(node: FieldNode): FieldNode | undefined {
        if (node.name.value !== "resource" || typeInfo.getParentType()?.name !== "Reference" || node.selectionSet === undefined) return undefined
        const argument = node.arguments?.find((candidate) => candidate.name.value === "type")
        const type = argument === undefined ? undefined : scalarText(argument.value)
        if (type === undefined || !isObjectType(schema.getType(type))) return undefined
        const fields = node.selectionSet.selections.filter((selection) => selection.kind === Kind.FIELD)
        if (fields.length === 0) return undefined
        const fragment: SelectionNode = {
          kind: Kind.INLINE_FRAGMENT,
          typeCondition: { kind: Kind.NAMED_TYPE, name: { kind: Kind.NAME, value: type } },
          selectionSet: { kind: Kind.SELECTION_SET, selections: fields }
        }
        const others = node.selectionSet.selections.filter((selection) => selection.kind !== Kind.FIELD)
        return { ...node, selectionSet: { ...node.selectionSet, selections: [...others, fragment] } }
      }
    },
    Argument: {
      enter(node: ArgumentNode): ArgumentNode | undefined {
        const argument = typeInfo.getArgument()
        if (argument === null || argument === undefined || node.value.kind === Kind.STRING) return undefined
        const type = getNullableType(argument.type)
        if (type !== GraphQLString && type !== GraphQLID) return undefined
        let text: string | undefined
        if (node.value.kind === Kind.LIST) {
          const field = typeInfo.getFieldDef()
          if (field === null || field === undefined || !searches(field.name)) return undefined
          const values = node.value.values.map(scalarText)
          if (values.some((value) => value === undefined)) return undefined
          text = searchAlternatives(values as ReadonlyArray<string>)
        } else {
          // An id written as a number is already an ID; a bare name is not.
          if (type === GraphQLID && node.value.kind === Kind.INT) return undefined
          text = scalarText(node.value)
        }
        return text === undefined ? undefined : { ...node, value: { kind: Kind.STRING, value: text } }
      }
    }
  }))
}
