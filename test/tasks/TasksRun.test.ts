/**
 * `kiln run` from a two-task kiln.json on a real pnpm workspace (issue #36): `core` builds an ES module that imports
 * `is-odd` (from the registry: pnpm links it into `packages/core/node_modules` only), `app` builds one that imports
 * `core`, and `app`'s test runs it. Every process runs from tasks declared once; `test:app` resolves core's `dist/`
 * (its build's outputs) and, from there, `is-odd` through core's own `node_modules`, which the tasks make inputs of
 * core's consumers. A run where nothing changed is all cache hits, answered by the run memo, and so is one after
 * tools run by hand left their caches under node_modules and what the .gitignore ignores in a package (a `.env`
 * excepted); a changed script runs its package's processes again.
 *
 * The install fetches pnpm and two small packages the first time on a machine, into caches under the system's temp
 * directory kept for the next run (as test/engine/RealTrees.test.ts does).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { pnpmInstall } from "../utils/installs.js"
import { cli } from "../utils/stack.js"
import { settleTimes, tempDir, writeTree } from "../utils/temp.js"

const KILN_JSON = JSON.stringify({
  tasks: { build: { outputs: ["dist/"] }, test: { deps: ["build", "^build"] } }
})

/** A build script that writes `dist/index.js` with `source`. */
const build = (source: string) =>
  `import * as fs from "node:fs"\nfs.mkdirSync("dist", { recursive: true })\n` +
  `fs.writeFileSync("dist/index.js", ${JSON.stringify(source)})\n`

interface Summary {
  readonly processes: ReadonlyArray<{ readonly name: string; readonly source: string }>
  readonly ran: number
  readonly cacheHits: number
}

describe("tasks: kiln run on a real pnpm workspace", () => {
  it.scopedLive(
    "build:<pkg> and test:<pkg> from two tasks; the consumer resolves its dependency's dist",
    () =>
      Effect.gen(function*() {
        const root = yield* tempDir("kiln-tasks-run-")
        const ws = path.join(root, "ws")
        writeTree(ws, {
          "package.json": JSON.stringify({ name: "root", private: true }),
          "pnpm-workspace.yaml": "packages:\n  - packages/*\n",
          "kiln.json": KILN_JSON,
          ".gitignore": "node_modules\ncoverage/\n*.tsbuildinfo\n.env\n",
          "packages/core/package.json": JSON.stringify({
            name: "core",
            version: "1.0.0",
            type: "module",
            exports: "./dist/index.js",
            dependencies: { "is-odd": "3.0.1" },
            scripts: { build: "node build.mjs" }
          }),
          "packages/core/build.mjs": build("import isOdd from \"is-odd\"\nexport const odd = (n) => isOdd(n)\n"),
          "packages/app/package.json": JSON.stringify({
            name: "app",
            version: "1.0.0",
            type: "module",
            dependencies: { core: "workspace:*" },
            scripts: { build: "node build.mjs", test: "node test.mjs" }
          }),
          "packages/app/build.mjs": build(
            "import { odd } from \"core\"\nexport const answer = odd(3) ? 'odd' : 'even'\n"
          ),
          "packages/app/test.mjs": "import { answer } from \"./dist/index.js\"\n" +
            "if (answer !== 'odd') throw new Error(answer)\nconsole.log('app: ' + answer)\n"
        })
        const install = yield* pnpmInstall(ws, "9")
        assert.strictEqual(install.code, 0, install.both)
        // pnpm's layout: is-odd is core's alone, where core's dist/ resolves it from.
        assert.isTrue(fs.existsSync(path.join(ws, "packages/core/node_modules/is-odd")))
        assert.isFalse(fs.existsSync(path.join(ws, "node_modules/is-odd")))
        settleTimes(ws)
        fs.mkdirSync(path.join(root, "sandboxes"))
        const env = {
          ...process.env,
          KILN_STORE_DIR: path.join(root, "store"),
          KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
          KILN_NAMED_CACHES_DIR: path.join(root, "named")
        }
        let runs = 0
        const kiln = (args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) => {
          const summaryFile = path.join(root, `summary-${runs++}.json`)
          const r = spawnSync(process.execPath, [cli, ...args, "--progress", "plain", "--summary", summaryFile], {
            cwd: ws,
            encoding: "utf8",
            env: { ...env, ...extraEnv }
          })
          const summary = fs.existsSync(summaryFile)
            ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary
            : undefined
          return { code: r.status, both: `${r.stdout}\n${r.stderr}`, summary }
        }
        const listed = spawnSync(process.execPath, [cli, "ls"], { cwd: ws, encoding: "utf8", env })
        assert.strictEqual(listed.status, 0, listed.stderr)
        assert.deepStrictEqual(listed.stdout.trim().split("\n").map((l) => l.split(/\s+/)[0]), [
          "build:app",
          "build:core",
          "test:app"
        ])
        // Each with the dry run's verdict: nothing has run yet.
        assert.match(
          listed.stdout,
          /test:app\s+packages\/app: node test\.mjs {2}<- build:app, build:core {2}\[run: dep build:app would run first\]\n/
        )
        const json = spawnSync(process.execPath, [cli, "ls", "--json"], { cwd: ws, encoding: "utf8", env })
        const written = JSON.parse(json.stdout) as {
          processes: Record<string, { argv: Array<string>; deps?: Array<string>; inputs: Array<string> }>
          origins: Record<string, { key: string; task: string; package: string; directory: string }>
        }
        assert.deepStrictEqual(written.processes["test:app"]!.argv, ["/bin/sh", "-c", "node test.mjs"])
        assert.includeMembers(written.processes["test:app"]!.inputs, [
          "packages/core/package.json",
          "packages/core/node_modules/**"
        ])
        assert.deepStrictEqual(
          written.origins["build:core"],
          {
            key: "build",
            task: "build",
            package: "core",
            directory: "packages/core"
          }
        )

        const first = kiln(["run"])
        assert.strictEqual(first.code, 0, first.both)
        assert.strictEqual(first.summary!.ran, 3, first.both)
        // Written back: each package's dist/, where its consumers and the user find it.
        assert.match(fs.readFileSync(path.join(ws, "packages/core/dist/index.js"), "utf8"), /is-odd/)
        assert.isTrue(fs.existsSync(path.join(ws, "packages/app/dist/index.js")))

        // Nothing changed: every process cached. The first run made each package's dist/, a new entry of a directory
        // the builds' inputs list, so the engine looks (and finds the same inputs); from then on the run memo answers.
        const again = kiln(["run"])
        assert.strictEqual(again.code, 0, again.both)
        assert.strictEqual(again.summary!.cacheHits, 3, again.both)
        const noop = kiln(["run"], { KILN_NOOP_DEBUG: "1" })
        assert.include(noop.both, "no-op check: nothing changed", noop.both)
        assert.strictEqual(noop.summary!.cacheHits, 3, noop.both)

        // Tools run by hand leave their caches under node_modules (vitest, vite, babel-loader), and what the
        // .gitignore ignores at a package's top (a coverage report, tsc's build info): not inputs, so the next run is
        // all cache hits, as it is on a checkout where nobody ran them.
        writeTree(ws, {
          "packages/core/node_modules/.vite/vitest/results.json": "{\"version\":\"3.0.0\"}\n",
          "packages/app/node_modules/.cache/babel-loader/x.json": "{}\n",
          "node_modules/.vite-temp/vite.config.ts.timestamp-1.mjs": "export default {}\n",
          "packages/core/coverage/lcov.info": "TN:\n",
          "packages/app/tsconfig.tsbuildinfo": "{}"
        })
        const byHand = kiln(["run"])
        assert.strictEqual(byHand.code, 0, byHand.both)
        assert.strictEqual(byHand.summary!.cacheHits, 3, byHand.both)

        // A .env is ignored too, but tools read it as they build: a new one is an input of its package's processes
        // (core's build, and app's build, which takes core's files), and test:app, whose inputs are the same bytes,
        // is a hit.
        writeTree(ws, { "packages/core/.env": "MODE=dev\n" })
        const withEnv = kiln(["run"])
        assert.strictEqual(withEnv.code, 0, withEnv.both)
        assert.deepStrictEqual(
          withEnv.summary!.processes.filter((p) => p.source !== "cache-hit").map((p) => p.name).sort(),
          ["build:app", "build:core"],
          withEnv.both
        )

        // A script is part of its process, and package.json one of its package's files: changing app's test script runs
        // app's processes again, with kiln.json unchanged, and not core's.
        const appJson = path.join(ws, "packages/app/package.json")
        const app = JSON.parse(fs.readFileSync(appJson, "utf8")) as { scripts: Record<string, string> }
        app.scripts.test = "node test.mjs && echo tested"
        fs.writeFileSync(appJson, JSON.stringify(app))
        const changed = kiln(["run"])
        assert.strictEqual(changed.code, 0, changed.both)
        assert.deepStrictEqual(
          changed.summary!.processes.filter((p) => p.source !== "cache-hit").map((p) => p.name),
          ["build:app", "test:app"],
          changed.both
        )
      }),
    300_000
  )
})
