/**
 * `node:crypto`, loaded on first use. The CLI's no-op check (`cli/noop.ts`) runs the modules that hash or name temp
 * files before anything else is loaded, and a run where nothing changed never needs crypto at all: loading it was a
 * visible part of that check. Plain code without Effect, for the same reason.
 */
import type * as NodeCrypto from "node:crypto"

let loaded: typeof NodeCrypto | undefined

const crypto = (): typeof NodeCrypto => (loaded ??= process.getBuiltinModule("node:crypto"))

/** sha256 of `bytes`, in hex (the one-shot `crypto.hash` where this Node has it: no `Hash` object to make). */
export const sha256Hex = (bytes: Uint8Array | string): string => {
  const c = crypto()
  return typeof c.hash === "function"
    ? c.hash("sha256", bytes, "hex")
    : c.createHash("sha256").update(bytes).digest("hex")
}

/** `n` random bytes, in hex. */
export const randomHex = (n: number): string => crypto().randomBytes(n).toString("hex")
