/**
 * A short name for a long key: 64 bits of two FNV-1a hashes of `text`'s UTF-16 units, in hex. A file's or socket's
 * name, never a digest: what it names records what it is of (a memo its workspace), or lives where only its user can
 * reach (a standby's socket).
 *
 * @internal
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
