/**
 * Which C library this Node runs on, read from its own executable's ELF interpreter, so that lmdb can pick its native
 * addon without loading detect-libc (three more modules at every start). Linux-specific: it reads
 * `/proc/self/exe`; elsewhere (and on anything it does not recognise) it answers undefined and detect-libc decides.
 * Plain code without Effect: the CLI's loader calls it before anything else is loaded.
 */
import * as fs from "node:fs"

/**
 * The libc this executable runs on, from its ELF interpreter (`/lib64/ld-linux-x86-64.so.2`, or a musl one), or
 * undefined when unsure. lmdb picks its native addon by it and asks detect-libc, which loads three more modules at
 * every start-up to read the same thing; with LIBC set it does not ask.
 */
export const libcOfSelf = (): string | undefined => {
  try {
    const head = Buffer.alloc(4096)
    const fd = fs.openSync("/proc/self/exe", "r")
    try {
      fs.readSync(fd, head, 0, head.length, 0)
    } finally {
      fs.closeSync(fd)
    }
    // A little-endian 64-bit ELF (x64, arm64); anything else is left to detect-libc.
    if (head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1) return undefined
    const phoff = Number(head.readBigUInt64LE(32))
    const phentsize = head.readUInt16LE(54)
    for (let i = 0, n = head.readUInt16LE(56); i < n; i++) {
      const p = phoff + i * phentsize
      if (p + 40 > head.length) return undefined
      if (head.readUInt32LE(p) !== 3) continue // PT_INTERP
      const offset = Number(head.readBigUInt64LE(p + 8))
      const size = Number(head.readBigUInt64LE(p + 32))
      if (offset + size > head.length) return undefined
      const interpreter = head.toString("latin1", offset, offset + size)
      return interpreter.includes("musl") ? "musl" : interpreter.includes("/ld-linux") ? "glibc" : undefined
    }
  } catch {
    // Not Linux, or no /proc: detect-libc decides.
  }
  return undefined
}
