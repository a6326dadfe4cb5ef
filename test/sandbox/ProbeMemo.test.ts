/**
 * The sandbox probes' answers kept between runs in the user's runtime directory: a run that finds them under the
 * same key (boot, user, namespaces, capabilities, sysctls) starts no probe program; another key probes afresh; a
 * directory another user could write is not read at all (a planted "it fails" would turn the strict sandbox off).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { vi } from "vitest"
import { tempDir } from "../utils/temp.js"

/** The module afresh: its answers are kept per process, and each case needs a process's first look. */
const fresh = Effect.promise(async () => {
  vi.resetModules()
  const MountNamespace = await import("../../src/os/mounts/MountNamespace.js")
  const SandboxNotice = await import("../../src/programs/kiln/run/sandboxNotice.js")
  return { MountNamespace, SandboxNotice }
})

const strictWorksHere = Effect.map(fresh, ({ MountNamespace }) => MountNamespace.strictProbe())

/** A runtime directory of this user's, as `PrivateDir.socketDirectory` makes it. */
const answersDir = Effect.map(tempDir("kiln-probe-memo-"), (root) => {
  fs.chmodSync(root, 0o700)
  return root
})

/** The kept answers with every probe set to fail, under the key the file has: what a probe that failed keeps. */
const plantFailures = (file: string, why: string) => {
  const kept = JSON.parse(fs.readFileSync(file, "utf8")) as { key: string; answers: Record<string, string | null> }
  const answers = Object.fromEntries(Object.keys(kept.answers).map((k) => [k, why]))
  fs.writeFileSync(file, JSON.stringify({ key: kept.key, answers }))
  return kept.key
}

describe("the sandbox probes' kept answers", () => {
  it.scoped("are kept in the runtime directory and answer the next run under the same key, and only under it", () =>
    Effect.gen(function*() {
      const here = yield* strictWorksHere
      if (!here.works) return console.warn(`skipped: the strict sandbox does not work here (${here.why})`)
      const root = yield* answersDir
      const file = path.join(root, "probes.json")
      const first = yield* fresh
      assert.isTrue(first.SandboxNotice.strictProbe(root)!.works)
      assert.isTrue(fs.existsSync(file), "the answers are kept")
      const key = plantFailures(file, "planted answer")
      // Under the same key the kept answer is taken: no probe runs (which would have found the sandbox works).
      const second = yield* fresh
      const taken = second.SandboxNotice.strictProbe(root)!
      assert.isFalse(taken.works)
      assert.include(taken.why, "planted answer")
      // Another boot, user, namespace or sysctl is another key: probed afresh, and kept anew.
      fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace(JSON.stringify(key), JSON.stringify(`${key}-other`)))
      const third = yield* fresh
      assert.isTrue(third.SandboxNotice.strictProbe(root)!.works)
      assert.notInclude(fs.readFileSync(file, "utf8"), "planted answer")
    }))

  it.scoped("are not read from a directory another user can write", () =>
    Effect.gen(function*() {
      const here = yield* strictWorksHere
      if (!here.works) return console.warn(`skipped: the strict sandbox does not work here (${here.why})`)
      const root = yield* answersDir
      const file = path.join(root, "probes.json")
      const first = yield* fresh
      first.SandboxNotice.strictProbe(root)
      plantFailures(file, "planted answer")
      fs.chmodSync(root, 0o777)
      const second = yield* fresh
      assert.isTrue(second.SandboxNotice.strictProbe(root)!.works, "probed afresh")
    }))
})
