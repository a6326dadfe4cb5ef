/**
 * effect is the user's: kiln names `effect` and the `@effect/*` packages it shares with its user as peer
 * dependencies, so that one copy of effect meets kiln's types and the user's (two copies fail `tsc` with
 * `[LayerTypeId] is missing`). Their range is what is tested here: the packed kiln installed beside the oldest
 * versions of its peer ranges (their lower bounds) and beside the newest (the versions this checkout pins as
 * devDependencies, which the whole suite runs on), a consumer's TypeScript typechecked against each (kiln's
 * declarations included: no `skipLibCheck`) and run: it stores a tree, has the sandboxer write it out and runs a
 * process on it through `Kiln.layer`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { cleanEnv, consumerProject, consumerTsconfig, installedPackages, npm, pack, sh, tsc } from "../utils/pack.js"
import { tempDir } from "../utils/temp.js"

const pkg = JSON.parse(fs.readFileSync("package.json", "utf8")) as {
  readonly peerDependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
}

/** A peer range's lower bound: kiln's ranges are written `>=LOW <HIGH`. */
const lowerBound = (range: string): string => {
  const low = /^>=(\d+\.\d+\.\d+) <\d+\.\d+\.\d+$/.exec(range)
  assert.isNotNull(low, `a peer range is written ">=LOW <HIGH": ${range}`)
  return low![1]!
}

const peers = Object.keys(pkg.peerDependencies)
const oldest = Object.fromEntries(peers.map((name) => [name, lowerBound(pkg.peerDependencies[name]!)]))
const newest = Object.fromEntries(peers.map((name) => [name, pkg.devDependencies[name]!]))

const program = `
import { Effect } from "effect"
import { Kiln, Process, ProcessRunner, Sandboxer, Store } from "kiln"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-peers-"))
fs.mkdirSync(path.join(root, "in"))
fs.writeFileSync(path.join(root, "in", "in.txt"), "from the store\\n")

const program = Effect.gen(function*() {
  const store = yield* Store.Store
  const sandboxer = yield* Sandboxer.Sandboxer
  const runner = yield* ProcessRunner.ProcessRunner
  const input = yield* store.snapshot(path.join(root, "in"))
  yield* sandboxer.materialize(input, path.join(root, "out"))
  const written = fs.readFileSync(path.join(root, "out", "in.txt"), "utf8")
  const result = yield* runner.run(
    new Process.Process({ argv: ["/bin/cat", "in.txt"], env: { PATH: "/usr/bin:/bin" }, inputDigest: input })
  )
  const stdout = Buffer.from(yield* store.getFile(result.stdoutDigest)).toString()
  console.log(JSON.stringify({ written, exitCode: result.exitCode, stdout }))
})

await Effect.runPromise(program.pipe(
  Effect.provide(Kiln.layer({
    store: { root: path.join(root, "store") },
    sandboxes: { root: path.join(root, "sandboxes") },
    runner: { namedCachesDir: path.join(root, "named_caches") }
  })),
  Effect.ensuring(Effect.sync(() => fs.rmSync(root, { recursive: true, force: true })))
))
`

/** Installs `tarball` with `versions` of the peers into a fresh project under `dir`, then typechecks and runs it. */
const consumer = (dir: string, tarball: string, versions: Record<string, string>) =>
  Effect.gen(function*() {
    const project = consumerProject(dir)
    const specs = Object.entries(versions).map(([name, version]) => `${name}@${version}`)
    // lmdb's prebuilt addon: its build with kiln's fixes is the global install's to show (pack.test.ts).
    const install = yield* npm(["install", "--ignore-scripts", tarball, ...specs], project)
    assert.strictEqual(install.code, 0, install.both)
    const installed = installedPackages(project)
    for (const [name, version] of Object.entries(versions)) {
      assert.deepStrictEqual(installed.get(name), [version], `${name}: one copy, the one asked for`)
    }
    fs.writeFileSync(path.join(project, "main.ts"), program)
    consumerTsconfig(project, ["main.ts"], { noEmit: false, outDir: "build", skipLibCheck: false })
    const typecheck = yield* tsc(project)
    assert.strictEqual(typecheck.code, 0, typecheck.both)
    const run = yield* sh(process.execPath, ["build/main.js"], project, { ...cleanEnv(), KILN_LMDB_PREBUILT: "1" })
    assert.strictEqual(run.code, 0, run.both)
    assert.deepStrictEqual(JSON.parse(run.stdout.trim().split("\n").at(-1)!), {
      written: "from the store\n",
      exitCode: 0,
      stdout: "from the store\n"
    })
  })

describe("effect as a peer dependency", () => {
  it("the peers are effect and the @effect/* packages kiln's library loads, each with a range", () => {
    assert.deepStrictEqual(peers.toSorted(), ["@effect/platform", "@effect/rpc", "effect"])
    for (const name of peers) assert.match(newest[name]!, /^\d+\.\d+\.\d+$/, `${name} is pinned as a devDependency`)
  })

  it.scoped(
    "a consumer on the oldest and on the newest effect of the range typechecks against kiln and runs it",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-peers-")
        const tarball = yield* pack(dir)
        yield* Effect.all([
          consumer(path.join(dir, "oldest"), tarball, oldest),
          consumer(path.join(dir, "newest"), tarball, newest)
        ], { concurrency: 2 })
      }),
    300_000
  )
})
