/**
 * `mkdir -p` that always terminates. Node 20's `fs.mkdirSync(p, { recursive: true })` spins forever when a parent
 * exists but refuses new entries with ENOENT (any path under /proc, for one): a bad `--store-dir` must be a
 * one-line error, not a hung process that ignores SIGTERM. Portable: nothing here is Linux-specific.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { errnoOf } from "./Errno.js"

/** @internal */
export const mkdirp = (dir: string, mode?: number): void => {
  const missing: Array<string> = []
  let current = path.resolve(dir)
  for (;;) {
    try {
      if (fs.statSync(current).isDirectory()) break
      throw Object.assign(new Error(`${current} is not a directory`), { code: "ENOTDIR" })
    } catch (e) {
      if (errnoOf(e) !== "ENOENT") throw e
    }
    missing.push(current)
    const parent = path.dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const d of missing.reverse()) {
    try {
      fs.mkdirSync(d, mode === undefined ? undefined : { mode })
    } catch (e) {
      if (errnoOf(e) !== "EEXIST" || !fs.statSync(d).isDirectory()) throw e
    }
  }
}
