import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Store from "../../src/layers/store/Store.js"
import { removeTree } from "../../src/os/RemoveTree.js"

/** A fresh directory, removed (read-only parts included) when the scope closes. */
export const tempDir = (prefix = "kiln-test-") =>
  Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => removeTree(dir))
  )

/** A Store in a fresh temp directory, with small map sizes. */
export const tempStore = (options: Partial<Store.Options> = {}) =>
  Effect.flatMap(tempDir("kiln-store-"), (root) => Store.make({ root, ...options }))

/** Writes files (`path → content`; a `{ link }` is a symlink, `{ mode }` sets the mode) under `root`. */
export const writeTree = (
  root: string,
  files: Record<
    string,
    string | Uint8Array | { readonly link: string } | { readonly content: string; readonly mode: number }
  >
) => {
  for (const [rel, spec] of Object.entries(files)) {
    const p = path.join(root, rel)
    fs.mkdirSync(path.dirname(p), { recursive: true })
    if (typeof spec === "string" || spec instanceof Uint8Array) fs.writeFileSync(p, spec)
    else if ("link" in spec) fs.symlinkSync(spec.link, p)
    else fs.writeFileSync(p, spec.content, { mode: spec.mode })
  }
}

/**
 * Moves the times of everything under `dir` but symlinks a minute into the past, so that no stat of it is racy when
 * a snapshot session walks it (a stat within a timestamp tick of a change does not let a directory stand in).
 */
export const settleTimes = (dir: string): void => {
  // Half past a second: a whole-second mtime would be judged with the coarse file systems' wider racy margin.
  const past = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000 + 500)
  const visit = (p: string) => {
    const st = fs.lstatSync(p)
    if (st.isSymbolicLink()) return
    if (st.isDirectory()) { for (const n of fs.readdirSync(p)) visit(path.join(p, n)) }
    fs.utimesSync(p, past, past)
  }
  visit(dir)
  // Setting the times made every ctime "now": a walk within the racy margin (10 ms) of them would find them racy.
  // The condition is the clock itself, so it is waited out on the clock.
  const clear = Date.now() + 25
  while (Date.now() < clear) continue
}
