/**
 * `node:crypto`, loaded on first use. The CLI's no-op check (`cli/noop.ts`) runs the modules that hash or name temp
 * files before anything else is loaded, and a run where nothing changed never needs crypto at all: loading it was a
 * visible part of that check. Plain code without Effect, for the same reason. A name that needs no digest at all
 * (`nameHash`) is made without it.
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

/**
 * A short name for a long key: 64 bits of two FNV-1a hashes of `text`'s UTF-16 units, in hex. A file's or socket's
 * name, never a digest: what it names records what it is of (a run memo its workspace), or lives where only its user
 * can reach (a standby's socket).
 */
export const nameHash = (text: string): string => {
  let a = 0x811c9dc5
  let b = 0x9e3779b9
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x5bd1e995)
  }
  return (a >>> 0).toString(16).padStart(8, "0") + (b >>> 0).toString(16).padStart(8, "0")
}
