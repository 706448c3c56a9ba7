/** The small Patient resources the workloads send, and the stored form the floor serves. */

const families = ["Smith", "Jones", "Garcia", "Nguyen", "Okafor", "Müller", "Rossi", "Tanaka"]
const givens = ["Ann", "Bob", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana"]

/** The system of the sample Patients' identifiers (`bench-<n>`). */
export const identifierSystem = "urn:svc:bench"

/** The n-th sample Patient (about 250 bytes of JSON), without id or meta. */
export const samplePatient = (n: number): Record<string, unknown> => ({
  resourceType: "Patient",
  identifier: [{ system: identifierSystem, value: `bench-${n}` }],
  active: n % 2 === 0,
  name: [{ family: families[n % families.length], given: [givens[(n >> 3) % givens.length]] }],
  gender: n % 2 === 0 ? "female" : "male",
  birthDate: `19${String(40 + (n % 60)).padStart(2, "0")}-0${1 + (n % 9)}-1${n % 10}`
})

/** The n-th sample Patient as svc stores and returns it after a create: with id and meta. */
export const storedPatient = (id: string, n: number, lastUpdated: string): string =>
  JSON.stringify({ ...samplePatient(n), id, meta: { versionId: "1", lastUpdated } })
