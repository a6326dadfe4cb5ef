/**
 * Node's errno exceptions, read: the code (`ENOENT`, or lmdb-js's numeric one by name) and a short description.
 * Plain code without Effect: the spawner and the CLI's loader use it before Effect is loaded. (`IoError.ts` turns
 * one into the store's typed error.)
 *
 * @internal
 */
import * as os from "node:os"

const names = new Map(Object.entries(os.constants.errno).map(([name, n]) => [n, name]))

/** Node's errno code (`"ENOENT"`), or the name of lmdb-js's numeric one (`30` is `"EROFS"`). @internal */
export const errnoOf = (e: unknown): string | undefined => {
  if (typeof e !== "object" || e === null || !("code" in e)) return undefined
  if (typeof e.code === "string") return e.code
  // LMDB's own codes are negative (MDB_READERS_FULL is -30790): only a positive number is an errno.
  return typeof e.code === "number" && e.code > 0 ? names.get(e.code) : undefined
}

const describe: Record<string, string> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EEXIST: "already exists",
  ENOTDIR: "not a directory",
  EISDIR: "is a directory",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  EROFS: "read-only file system",
  EMFILE: "too many open files",
  ELOOP: "too many levels of symbolic links",
  ENAMETOOLONG: "file name too long",
  EIO: "input/output error",
  ETXTBSY: "text file busy"
}

/** @internal */
export const describeErrno = (e: unknown): string => {
  const code = errnoOf(e)
  if (code !== undefined) return `${describe[code] ?? "failed"} (${code})`
  return e instanceof Error ? e.message : String(e)
}
