/**
 * Structured logs: one JSON object per line on standard output. The sink redacts every line, so no
 * secret reaches a log whichever module wrote it.
 */
import { Cause, Context, Effect, HashMap, Layer, List, Logger, LogLevel } from "effect"

export class LogSink extends Context.Tag("svc/logging/LogSink")<LogSink, {
  readonly write: (line: string) => void
}>() {}

export type Redact = (text: string) => string

/** Lines held at most before they are written at once, whatever the turn of the event loop. */
const heldLines = 256

/**
 * Lines written to `out` together: those logged in one turn of the event loop (a request's line each, under load
 * dozens) go in one write when the turn's I/O is done (`setImmediate`), not a write each: at some 1,600 searches a
 * second, a write per line cost a twentieth of the server's CPU. Whatever is held is written when the scope closes
 * and when the process exits (standard output on files and pipes is written synchronously on Linux and macOS).
 */
export const batchedLines = (out: (text: string) => void) => {
  let held: Array<string> = []
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (held.length === 0) return
    const text = held.join("")
    held = []
    out(text)
  }
  return {
    write: (line: string) => {
      held.push(line)
      if (held.length >= heldLines) flush()
      else if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush
  }
}

/** Standard output, every line redacted first; lines of one turn of the event loop written together (`batchedLines`). */
export const stdoutSink = (redact: Redact) =>
  Layer.scoped(
    LogSink,
    Effect.gen(function*() {
      const lines = batchedLines((text) => void process.stdout.write(text))
      process.on("exit", lines.flush)
      yield* Effect.addFinalizer(() => Effect.sync(() => {
        process.off("exit", lines.flush)
        lines.flush()
      }))
      return { write: (line: string) => lines.write(redact(line) + "\n") }
    })
  )

/** A sink that keeps lines in memory, for tests. */
export const memorySink = (lines: Array<string>) => Layer.succeed(LogSink, { write: (line) => void lines.push(line) })

const levelName = (level: LogLevel.LogLevel): string => level.label.toLowerCase()

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Error)

/** Text parts form the message; plain objects logged beside it become fields of the line. */
const messageParts = (message: unknown): { readonly text: string; readonly fields: Record<string, unknown> } => {
  const parts: ReadonlyArray<unknown> = Array.isArray(message) ? message : [message]
  const texts: Array<string> = []
  const fields: Record<string, unknown> = {}
  for (const part of parts) {
    if (isRecord(part)) Object.assign(fields, part)
    else texts.push(typeof part === "string" ? part : String(part))
  }
  return { text: texts.join(" "), fields }
}

export const jsonLogger = (sink: Context.Tag.Service<LogSink>) =>
  Logger.make<unknown, void>(({ annotations, cause, date, logLevel, message, spans }) => {
    const { fields, text } = messageParts(message)
    const line: Record<string, unknown> = { time: date.toISOString(), level: levelName(logLevel), message: text, ...fields }
    for (const [key, value] of HashMap.toEntries(annotations)) line[key] = value
    if (!Cause.isEmpty(cause)) line["cause"] = Cause.pretty(cause)
    const now = date.getTime()
    for (const span of List.toArray(spans)) line[`${span.label}_ms`] = now - span.startTime
    sink.write(JSON.stringify(line))
  })

export const parseLevel = (name: string): LogLevel.LogLevel => {
  switch (name) {
    case "debug":
      return LogLevel.Debug
    case "warning":
      return LogLevel.Warning
    case "error":
      return LogLevel.Error
    default:
      return LogLevel.Info
  }
}

/** Replaces Effect's default logger with the JSON logger at the given minimum level. */
export const layer = (level: string): Layer.Layer<never, never, LogSink> =>
  Layer.unwrapEffect(
    Effect.map(LogSink, (sink) =>
      Layer.merge(
        Logger.replace(Logger.defaultLogger, jsonLogger(sink)),
        Logger.minimumLogLevel(parseLevel(level))
      ))
  )
