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
  /** What it supports, a few lines for `kiln remote status`. */
  readonly lines: ReadonlyArray<string>
}
