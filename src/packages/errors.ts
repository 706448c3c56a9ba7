/** The errors of the packages module: each renders as one line that names the package and where it came from. */
import { Schema } from "effect"

/** The downloaded tarball does not match the registry's `dist.integrity` (or `dist.shasum`). */
export class PackageIntegrityError extends Schema.TaggedError<PackageIntegrityError>()("PackageIntegrityError", {
  package: Schema.String,
  source: Schema.String,
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message(): string {
    return `package ${this.package} from ${this.source} failed its integrity check: expected ${this.expected}, got ${this.actual}`
  }
}

/** The package.json (or the content) does not describe a FHIR package; see docs/packages.md for the rule. */
export class NotAFhirPackage extends Schema.TaggedError<NotAFhirPackage>()("NotAFhirPackage", {
  package: Schema.String,
  source: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.package} from ${this.source} is not a FHIR package: ${this.reason}`
  }
}

/** A `*.json` file of the package is not valid JSON. */
export class ResourceNotJson extends Schema.TaggedError<ResourceNotJson>()("ResourceNotJson", {
  package: Schema.String,
  source: Schema.String,
  file: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `package ${this.package} from ${this.source}: ${this.file} is not JSON (${this.reason})`
  }
}

/** No source has the package at a version matching the request. */
export class PackageNotFound extends Schema.TaggedError<PackageNotFound>()("PackageNotFound", {
  package: Schema.String,
  tried: Schema.Array(Schema.String)
}) {
  override get message(): string {
    const tried = this.tried.length === 0 ? "no sources configured" : `tried ${this.tried.join("; ")}`
    return `package ${this.package} was not found: ${tried}`
  }
}

/** The S3-compatible store refused or could not be addressed (credentials, endpoint, permissions). */
export class S3Error extends Schema.TaggedError<S3Error>()("S3Error", {
  package: Schema.String,
  source: Schema.String,
  status: Schema.optional(Schema.Number),
  reason: Schema.String
}) {
  override get message(): string {
    const status = this.status === undefined ? "" : ` (HTTP ${this.status})`
    return `package ${this.package} from ${this.source}${status}: ${this.reason}`
  }
}

/** A source answered, but not in a way that can be used (bad document, broken tarball, disk failure). */
export class PackageSourceError extends Schema.TaggedError<PackageSourceError>()("PackageSourceError", {
  package: Schema.String,
  source: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `package ${this.package} from ${this.source}: ${this.reason}`
  }
}

/** A `--package` path (a `.tgz` or a directory) does not exist. */
export class PackagePathNotFound extends Schema.TaggedError<PackagePathNotFound>()("PackagePathNotFound", {
  path: Schema.String
}) {
  override get message(): string {
    return `package path ${this.path} does not exist`
  }
}

/** The text given as a package is neither `name@version` nor a path. */
export class PackageSpecInvalid extends Schema.TaggedError<PackageSpecInvalid>()("PackageSpecInvalid", {
  spec: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `package ${JSON.stringify(this.spec)} is not valid: ${this.reason}`
  }
}

/** A package given by reference (`$install`'s `url`) that no configured source holds, or that cannot be read as one. */
export class PackageReferenceRefused extends Schema.TaggedError<PackageReferenceRefused>()("PackageReferenceRefused", {
  reference: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `the package reference ${this.reference} is refused: ${this.reason}`
  }
}

/** A dependency no source has, where dependencies are required (`$install`). */
export class DependencyMissing extends Schema.TaggedError<DependencyMissing>()("DependencyMissing", {
  package: Schema.String,
  requiredBy: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.package}, required by ${this.requiredBy}, cannot be had: ${this.reason}`
  }
}

export type PackageError =
  | PackageIntegrityError
  | NotAFhirPackage
  | ResourceNotJson
  | PackageNotFound
  | S3Error
  | PackageSourceError
  | PackagePathNotFound
  | PackageSpecInvalid
  | PackageReferenceRefused
  | DependencyMissing

/** The plain-words text of an unknown failure, without stack traces. */
export const causeText = (cause: unknown): string => {
  if (cause instanceof Error) {
    const inner = "cause" in cause && cause.cause instanceof Error ? cause.cause : undefined
    // fetch wraps the socket error ("fetch failed"): the inner one names the cause.
    if (inner !== undefined && inner.message !== "") return `${cause.message}: ${inner.message}`
    return cause.message
  }
  return String(cause)
}
