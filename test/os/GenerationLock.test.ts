/**
 * The lock that survives its holder's `kill -9`: taken, held against another holder, released, taken over from a
 * holder that died (a real process killed with SIGKILL while holding it, and a recycled pid), and the race of a
 * taker that read an old listing. Every lock lives in the test's temp dir; every process is SIGKILLed with its scope.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as GenerationLock from "../../src/os/GenerationLock.js"
import * as Proc from "../../src/os/Proc.js"
import { exitOf, firstLine, spawnScoped } from "../utils/child.js"
import { tempDir } from "../utils/temp.js"

const me = Proc.self()
/** This test's pid with another start time: a process that had this pid once, and is dead. */
const recycled: Proc.Owner = { pid: process.pid, startTime: "1" }

const taken = (a: GenerationLock.Attempt) => {
  assert.strictEqual(a._tag, "Taken", JSON.stringify(a))
  return a as Extract<GenerationLock.Attempt, { _tag: "Taken" }>
}

describe("GenerationLock", () => {
  it.scoped("is taken, held against anyone else while its holder lives, and free once released", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir(), "lock")
      const first = taken(GenerationLock.tryTake(dir, me))
      assert.isUndefined(first.stale)
      assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
      // Another holder in this same process waits as any other would.
      assert.deepStrictEqual(GenerationLock.tryTake(dir, me), { _tag: "Held", by: me })
      GenerationLock.release(dir, first.generation, me)
      const second = taken(GenerationLock.tryTake(dir, me))
      assert.isUndefined(second.stale, "a released lock is not stale")
      assert.isAbove(second.generation, first.generation)
      // Only the top is kept.
      assert.deepStrictEqual(fs.readdirSync(dir), [String(second.generation)])
    }))

  it.scoped("a holder killed with SIGKILL leaves it stale: the next taker takes it and is told", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir(), "lock")
      // The built modules: the tests run on a build (`cli` is dist's too).
      const script = `const L = await import(${JSON.stringify(path.resolve("dist/os/GenerationLock.js"))});` +
        `const P = await import(${JSON.stringify(path.resolve("dist/os/Proc.js"))});` +
        `const a = L.tryTake(${JSON.stringify(dir)}, P.self()); console.log(a._tag); setInterval(() => {}, 1000)`
      const child = yield* spawnScoped(process.execPath, ["--input-type=module", "-e", script])
      assert.strictEqual(yield* firstLine(child), "Taken")
      const holder = { pid: child.pid!, startTime: Proc.startTimeOf(child.pid!)! }
      assert.deepStrictEqual(GenerationLock.tryTake(dir, me), { _tag: "Held", by: holder })
      child.kill("SIGKILL")
      yield* exitOf(child)
      const next = taken(GenerationLock.tryTake(dir, me))
      assert.deepStrictEqual(next.stale, holder)
    }))

  it.scoped("a holder whose pid was recycled is dead; a record that is not one is free", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir(), "lock")
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, "4"), JSON.stringify({ ...recycled, state: "held" }))
      const next = taken(GenerationLock.tryTake(dir, me))
      assert.deepStrictEqual(next.stale, recycled)
      assert.strictEqual(next.generation, 5)
      GenerationLock.release(dir, next.generation, me)
      fs.writeFileSync(path.join(dir, "9"), "not a record")
      assert.strictEqual(taken(GenerationLock.tryTake(dir, me)).generation, 10)
    }))

  it.scoped("a taker that read an old listing, and made a number freed below the top, gives it back", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir(), "lock")
      GenerationLock.release(dir, taken(GenerationLock.tryTake(dir, me)).generation, me)
      let raced = false
      let top = -1
      // Between the late taker's reading of the free top (0) and its making 1: another takes 1, releases it, takes 2
      // (removing 1). The late taker then makes 1, which is free again, but is not the top.
      const late = GenerationLock.tryTake(dir, recycled, undefined, () => {
        if (raced) return
        raced = true
        GenerationLock.release(dir, taken(GenerationLock.tryTake(dir, me)).generation, me)
        top = taken(GenerationLock.tryTake(dir, me)).generation
      })
      assert.strictEqual(top, 2)
      assert.deepStrictEqual(late, { _tag: "Held", by: me })
      assert.deepStrictEqual(fs.readdirSync(dir), ["2"])
    }))

  it.scoped("temp files of dead writers are removed; a live writer's are not", () =>
    Effect.gen(function*() {
      const dir = path.join(yield* tempDir(), "lock")
      fs.mkdirSync(dir)
      const dead = `tmp-${recycled.pid}-${recycled.startTime}-0badf00d`
      const live = `tmp-${me.pid}-${me.startTime}-0badf00d`
      fs.writeFileSync(path.join(dir, dead), "")
      fs.writeFileSync(path.join(dir, live), "")
      taken(GenerationLock.tryTake(dir, me))
      assert.isFalse(fs.existsSync(path.join(dir, dead)))
      assert.isTrue(fs.existsSync(path.join(dir, live)))
    }))
})
