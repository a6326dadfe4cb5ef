/**
 * A waiting standby's store, through the built CLI: it opens the environments the run that started it opened
 * (`store/OpenAhead.ts`), so that the run it takes on finds them open; a run with other store settings still runs;
 * and after `KILN_STANDBY_STORE_MS` with no run it lets the store go, waiting on with none of it mapped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { eventually } from "../utils/child.js"
import type { CliResult } from "../utils/cliRun.js"
import { isAlive, PATH, workspace } from "../utils/standbyWorkspace.js"

const gen = {
  argv: ["/bin/sh", "-c", "mkdir -p out && cat src/* > out/gen.txt"],
  inputs: ["src/**"],
  outputs: ["out/gen.txt"],
  env: { PATH }
}

/** The store's data files `pid` has mapped. */
const mappedStoreFiles = (pid: number, store: string): Array<string> => {
  try {
    const lines = fs.readFileSync(`/proc/${pid}/maps`, "utf8").split("\n")
    return [...new Set(lines.map((l) => l.slice(l.indexOf("/"))).filter((f) => f.startsWith(`${store}/`)))]
  } catch {
    return []
  }
}

const tookOn = (r: CliResult, ran: number) => {
  assert.strictEqual(r.code, 0, r.stderr)
  assert.include(r.stderr, "kiln: standby: taken on")
  assert.strictEqual((JSON.parse(r.stdout) as { ran: number }).ran, ran)
}

describe("a waiting standby's store", () => {
  it.scopedLive("holds the last run's environments open; the run it takes finds them; other settings still run", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      const store = path.join(w.root, "store")
      const standby = yield* w.runThenStandby()
      yield* eventually(
        "the standby has the store mapped",
        () => mappedStoreFiles(standby, store).some((f) => f.endsWith("/data.mdb"))
      )
      // A restore: every result from the store, through the environments it opened.
      fs.rmSync(path.join(w.ws, "out"), { recursive: true })
      tookOn(yield* w.kiln(["run", "--summary", "-"]), 0)
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "one\n")
      yield* w.standbyWaits
      // A run that asks for other settings than those the standby opened with (the first opener of an environment
      // in a process fixes them): the waiting ones are closed first, and it runs.
      fs.writeFileSync(path.join(w.ws, "src/a.txt"), "two\n")
      tookOn(yield* w.kiln(["run", "--summary", "-", "--store-max-readers", "300"]), 1)
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
      yield* w.standbyWaits
      fs.rmSync(path.join(w.ws, "out"), { recursive: true })
      tookOn(yield* w.kiln(["run", "--summary", "-", "--store-max-readers", "300"]), 0)
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "two\n")
    }))

  it.scopedLive("lets the store go after KILN_STANDBY_STORE_MS with no run, and waits on", () =>
    Effect.gen(function*() {
      const w = yield* workspace({ gen }, { "src/a.txt": "one\n" })
      const store = path.join(w.root, "store")
      const standby = yield* w.runThenStandby({ KILN_STANDBY_STORE_MS: "3000" })
      yield* eventually(
        "the standby has the store mapped",
        () => mappedStoreFiles(standby, store).some((f) => f.endsWith("/data.mdb"))
      )
      yield* eventually("the standby has let the store go", () => mappedStoreFiles(standby, store).length === 0)
      assert.isTrue(isAlive(standby))
      // It still takes the next run, which opens the store itself.
      fs.rmSync(path.join(w.ws, "out"), { recursive: true })
      tookOn(yield* w.kiln(["run", "--summary", "-"]), 0)
      assert.strictEqual(fs.readFileSync(path.join(w.ws, "out/gen.txt"), "utf8"), "one\n")
    }))
})
