/**
 * This boot's id: a random UUID the kernel makes at each boot, so that state recorded under one boot (LMDB's lock
 * file records it) can be told from a later boot's. Linux-specific: it reads `/proc/sys/kernel/random/boot_id`;
 * elsewhere it answers undefined (a port: `sysctl kern.bootsessionuuid` on macOS). Plain code without Effect.
 */
import * as fs from "node:fs"

/** The boot id as the kernel writes it (`1b4e28ba-2fa1-…`, newline and all); undefined when there is none. */
export const bootIdText = (): string | undefined => {
  try {
    return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8")
  } catch {
    return undefined
  }
}
