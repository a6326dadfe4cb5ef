/**
 * An action-cache entry: what it holds of a result, its JSON encoding (written directly, decoded by a fast path the
 * schema backs), and whether a result may be stored at all.
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type Process, ProcessResult } from "../../../domain/Process.js"

/**
 * What an action-cache entry holds: the result's fields that do not depend on how it was obtained.
 *
 * @internal
 */
export const EntryFields = Schema.Struct(ProcessResult.fields).pipe(
  Schema.pick("exitCode", "signal", "timedOut", "stdoutDigest", "stderrDigest", "outputDigest", "durationMs")
)
const Entry = Schema.parseJson(EntryFields)
/**
 * The general decoder of an entry's JSON text, which {@link decodeEntry} must agree with.
 *
 * @internal
 */
export const decodeEntrySchema = Schema.decodeUnknownOption(Entry)
type EntryType = typeof Entry.Type

const HASH = /^[0-9a-f]{64}$/
const isDigest = (d: unknown): boolean =>
  typeof d === "object" && d !== null && Object.keys(d).length === 2 &&
  typeof (d as any).hash === "string" && HASH.test((d as any).hash) &&
  Number.isSafeInteger((d as any).sizeBytes) && (d as any).sizeBytes >= 0
const ENTRY_KEYS = 7

/** Whether `json` has exactly the shape of an entry kiln writes, every field valid. */
const isEntry = (json: any): boolean =>
  typeof json === "object" && json !== null && Object.keys(json).length === ENTRY_KEYS &&
  (json.exitCode === null || Number.isInteger(json.exitCode)) &&
  (json.signal === null || typeof json.signal === "string") &&
  typeof json.timedOut === "boolean" &&
  isDigest(json.stdoutDigest) && isDigest(json.stderrDigest) && isDigest(json.outputDigest) &&
  typeof json.durationMs === "number" && Number.isFinite(json.durationMs)

/**
 * Decodes an entry. A run reads hundreds of them, and the schema decoder is dear for each; entries kiln wrote
 * have exactly this shape, so it is checked directly and the schema only decides what does not fit it.
 *
 * @internal
 */
export const decodeEntry = (text: string): Option.Option<EntryType> => {
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    return Option.none()
  }
  return isEntry(json) ? Option.some(json as EntryType) : decodeEntrySchema(text)
}

/**
 * The general encoder of an entry, which {@link encodeEntry} must agree with byte for byte.
 *
 * @internal
 */
export const encodeEntrySchema = Schema.encodeSync(Entry)

/** A digest as the schema encodes it; anything else as it is, for the schema to refuse. */
const digestJson = (d: EntryType["stdoutDigest"]): unknown =>
  typeof d === "object" && d !== null ? { hash: d.hash, sizeBytes: d.sizeBytes } : d

/**
 * Encodes an entry: what the schema encodes, written directly (a run writes one per process it runs, and the schema
 * encoder was most of that write's CPU). Anything the decoder's fast path would not accept (an invalid entry, a
 * duration that is not finite) goes to the schema, which refuses it or encodes it as it always did.
 *
 * @internal
 */
export const encodeEntry = (entry: EntryType): string => {
  const json = {
    exitCode: entry.exitCode,
    signal: entry.signal,
    timedOut: entry.timedOut,
    stdoutDigest: digestJson(entry.stdoutDigest),
    stderrDigest: digestJson(entry.stderrDigest),
    outputDigest: digestJson(entry.outputDigest),
    durationMs: entry.durationMs
  }
  return isEntry(json) ? JSON.stringify(json) : encodeEntrySchema(entry)
}

/**
 * Whether a result may be stored. A timeout never is, whatever the policy: it says how loaded the machine was, not
 * what the action computes, and a cached one would fail every later build until the cache is cleared (Bazel never
 * caches one either).
 *
 * @internal
 */
export const cacheable = (proc: Process, result: ProcessResult) =>
  result.reproducible &&
  (proc.cache === "always" || (proc.cache === "successful" && result.succeeded))
