/**
 * The REAPI v2 `Command`, `Action` and `Platform` messages, canonically encoded. An action's digest is the key of
 * the action cache: anything that can change a process's result is in it.
 *
 * @since 0.1.0
 */
import type * as Digest from "./Digest.js"
import { compareUtf8, writeDigest, Writer } from "./internal/protobuf.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Platform {
  readonly properties: ReadonlyArray<{ readonly name: string; readonly value: string }>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Command {
  readonly arguments: ReadonlyArray<string>
  readonly environmentVariables?: Readonly<Record<string, string>>
  readonly outputFiles?: ReadonlyArray<string>
  readonly outputDirectories?: ReadonlyArray<string>
  readonly platform?: Platform
  readonly workingDirectory?: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Action {
  readonly commandDigest: Digest.Digest
  readonly inputRootDigest: Digest.Digest
  /** Milliseconds; encoded as a `google.protobuf.Duration`. */
  readonly timeoutMs?: number
  readonly doNotCache?: boolean
  readonly salt?: Uint8Array
  readonly platform?: Platform
}

const writePlatform = (w: Writer, platform: Platform): void => {
  const sorted = [...platform.properties].sort((a, b) => compareUtf8(a.name, b.name) || compareUtf8(a.value, b.value))
  for (const p of sorted) {
    w.messageField(1, (m) => {
      if (p.name.length > 0) m.stringField(1, p.name)
      if (p.value.length > 0) m.stringField(2, p.value)
    })
  }
}

const sortedUnique = (xs: ReadonlyArray<string>): Array<string> => [...new Set(xs)].sort(compareUtf8)

/**
 * Canonical bytes of a `Command`: environment variables sorted by name, output paths sorted, no empty platform.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeCommand = (command: Command): Uint8Array => {
  const w = new Writer()
  for (const arg of command.arguments) w.stringField(1, arg)
  const env = Object.keys(command.environmentVariables ?? {}).sort(compareUtf8)
  for (const name of env) {
    const value = command.environmentVariables![name]!
    w.messageField(2, (m) => {
      if (name.length > 0) m.stringField(1, name)
      if (value.length > 0) m.stringField(2, value)
    })
  }
  for (const path of sortedUnique(command.outputFiles ?? [])) w.stringField(3, path)
  for (const path of sortedUnique(command.outputDirectories ?? [])) w.stringField(4, path)
  if (command.platform !== undefined && command.platform.properties.length > 0) {
    w.messageField(5, (m) => writePlatform(m, command.platform!))
  }
  if (command.workingDirectory !== undefined && command.workingDirectory.length > 0) {
    w.stringField(6, command.workingDirectory)
  }
  return w.finish()
}

/**
 * Canonical bytes of an `Action`.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeAction = (action: Action): Uint8Array => {
  const w = new Writer()
  w.messageField(1, (m) => writeDigest(m, action.commandDigest))
  w.messageField(2, (m) => writeDigest(m, action.inputRootDigest))
  if (action.timeoutMs !== undefined && action.timeoutMs > 0) {
    const seconds = Math.floor(action.timeoutMs / 1000)
    const nanos = (action.timeoutMs % 1000) * 1_000_000
    w.messageField(6, (m) => {
      if (seconds > 0) m.varintField(1, seconds)
      if (nanos > 0) m.varintField(2, nanos)
    })
  }
  if (action.doNotCache === true) w.varintField(7, 1)
  if (action.salt !== undefined && action.salt.length > 0) w.bytesField(9, action.salt)
  if (action.platform !== undefined && action.platform.properties.length > 0) {
    w.messageField(10, (m) => writePlatform(m, action.platform!))
  }
  return w.finish()
}
