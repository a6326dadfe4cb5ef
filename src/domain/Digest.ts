/**
 * A content digest as REAPI v2 defines it: the SHA-256 of the bytes (lowercase hex) and their length.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"

/**
 * @since 0.1.0
 * @category models
 */
export interface Digest {
  readonly hash: string
  readonly sizeBytes: number
}

const HASH = /^[0-9a-f]{64}$/

/**
 * @since 0.1.0
 * @category schemas
 */
export const Hash = Schema.String.pipe(
  Schema.pattern(HASH, { message: () => "a SHA-256 hash is 64 lowercase hex digits" })
)

/**
 * @since 0.1.0
 * @category schemas
 */
export const Digest: Schema.Schema<Digest> = Schema.Struct({
  hash: Hash,
  sizeBytes: Schema.NonNegativeInt
})

/**
 * The digest of zero bytes: both the empty file and the empty `Directory` (whose encoding is zero bytes).
 * It is always present in every store, without I/O.
 *
 * @since 0.1.0
 * @category constants
 */
export const empty: Digest = {
  hash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  sizeBytes: 0
}

/**
 * @since 0.1.0
 * @category predicates
 */
export const isEmpty = (digest: Digest): boolean => digest.sizeBytes === 0 && digest.hash === empty.hash

/**
 * @since 0.1.0
 * @category predicates
 */
export const equals = (a: Digest, b: Digest): boolean => a.hash === b.hash && a.sizeBytes === b.sizeBytes

/**
 * Text form `<hash>/<size>`, as Bazel and Pants print digests.
 *
 * @since 0.1.0
 * @category formatting
 */
export const format = (digest: Digest): string => `${digest.hash}/${digest.sizeBytes}`

/**
 * @since 0.1.0
 * @category constructors
 */
export const ofBytes = (bytes: Uint8Array): Digest =>
  bytes.length === 0 ? empty : { hash: sha256Hex(bytes), sizeBytes: bytes.length }

// Node's one-shot `crypto.hash` takes a third of the time of a `Hash` object on the small blobs and directories that
// every process stores. (`os/LazyCrypto.ts` is the same for code that must not load Effect or crypto up front.)
const sha256Hex: (bytes: Uint8Array) => string = typeof Crypto.hash === "function"
  ? (bytes) => Crypto.hash("sha256", bytes, "hex")
  : (bytes) => Crypto.createHash("sha256").update(bytes).digest("hex")

/**
 * @since 0.1.0
 * @category errors
 */
export class InvalidDigest extends Schema.TaggedError<InvalidDigest>("kiln/InvalidDigest")("InvalidDigest", {
  input: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `invalid digest \`${this.input}\`: ${this.reason}`
  }
}

/**
 * Whether {@link parse} accepts `input`, without building the digest: for text kiln wrote itself (the run memo), checked
 * in bulk before any of it is parsed.
 *
 * @since 0.1.0
 * @category parsing
 */
export const isText = (input: string): boolean => {
  if (!TEXT.test(input)) return false
  const size = input.slice(65)
  if (size === "0") return input.startsWith(empty.hash)
  return size.length < 16 || Number.isSafeInteger(Number(size))
}

const TEXT = /^[0-9a-f]{64}\/(0|[1-9][0-9]{0,15})$/

/**
 * Parses `<hash>/<size>`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (input: string): Either.Either<Digest, InvalidDigest> => {
  const slash = input.indexOf("/")
  if (slash < 0) {
    return Either.left(new InvalidDigest({ input, reason: "expected `<sha256 hex>/<size in bytes>`" }))
  }
  const hash = input.slice(0, slash)
  const size = input.slice(slash + 1)
  if (!HASH.test(hash)) {
    return Either.left(new InvalidDigest({ input, reason: "the hash must be 64 lowercase hex digits" }))
  }
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size))) {
    return Either.left(new InvalidDigest({ input, reason: "the size must be a non-negative integer" }))
  }
  const sizeBytes = Number(size)
  if (sizeBytes === 0 && hash !== empty.hash) {
    return Either.left(new InvalidDigest({ input, reason: "only the empty hash has size 0" }))
  }
  return Either.right({ hash, sizeBytes })
}

/**
 * Digest text form `<hash>/<size>` as a Schema, for config files, the CLI and the wire.
 *
 * @since 0.1.0
 * @category schemas
 */
export const DigestFromString: Schema.Schema<Digest, string> = Schema.transformOrFail(Schema.String, Digest, {
  strict: true,
  decode: (s, _, ast) => Either.mapLeft(parse(s), (e) => new ParseResult.Type(ast, s, e.reason)),
  encode: (d) => Either.right(format(d))
})

/**
 * Bytes that the store, a sandbox or a caller relied on are absent. The engine reacts by re-running the process
 * that produced them (backtracking).
 *
 * @since 0.1.0
 * @category errors
 */
export class MissingDigest extends Schema.TaggedError<MissingDigest>("kiln/MissingDigest")("MissingDigest", {
  digest: Digest,
  kind: Schema.Literal("file", "directory", "blob"),
  neededBy: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const by = this.neededBy === undefined ? "" : ` needed by \`${this.neededBy}\``
    return `missing ${this.kind} ${format(this.digest)}${by}`
  }
}
