/**
 * What a remote cache supports, as its probe found it (Capabilities over gRPC, a HEAD over HTTP).
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export interface Capabilities {
  /** The largest batch request the server takes; 0 when it has no batches (an HTTP cache). */
  readonly maxBatchBytes: number
  /** What the server's action cache allows: a CAS-only server has none. */
  readonly actionCache: "read-write" | "read" | "none"
  readonly execution: boolean
  /**
   * The digest functions the server offers, when it does not offer SHA-256 (the only one kiln hashes with): such a
   * server is not used. Absent when it offers SHA-256 (or, as REAPI 2.0 servers may, names none).
   */
  readonly withoutSha256?: ReadonlyArray<string>
  /** What it supports, a few lines for `kiln remote status`. */
  readonly lines: ReadonlyArray<string>
}
