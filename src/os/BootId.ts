/**
 * This boot's id: a random UUID the kernel makes at each boot, so that state recorded under one boot (LMDB's lock
 * file records it) can be told from a later boot's. Linux-specific: it reads `/proc/sys/kernel/random/boot_id`;
 * elsewhere it answers undefined (a port: `sysctl kern.bootsessionuuid` on macOS). Plain code without Effect.
 */
import * as fs from "node:fs"

let known: { readonly text: string | undefined } | undefined

/**
 * The boot id as the kernel writes it (`1b4e28ba-2fa1-…`, newline and all); undefined when there is none. Read once
 * per process: a process never outlives its boot, and the shared trees ask for it for every tree each sandbox mounts.
 */
export const bootIdText = (): string | undefined => {
  if (known !== undefined) return known.text
  let text: string | undefined
  try {
    text = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8")
  } catch {
    text = undefined
  }
  known = { text }
  return text
}
