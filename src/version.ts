/** The build's version, from package.json (Semantic Versioning). */
import pkg from "../package.json" with { type: "json" }

export const buildVersion: string = pkg.version
