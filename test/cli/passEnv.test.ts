/**
 * kiln.json's `passEnv`, `passThroughEnv` and `defaults`, through the built CLI on real runs: a passEnv value is part
 * of the key (a new one runs again, and the no-op check sees it before anything loads; explain names it), a
 * pass-through value is not (a new one is a cache hit) and appears in no file kiln wrote; a variable listed but unset
 * is one line naming the file and the field, exit 2; the defaults reach explicit processes and the ones tasks give.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { cli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const PATH = "/usr/bin:/bin"

interface Summary {
  readonly processes: ReadonlyArray<{ name: string; source: string; actionDigest: string | null }>
  readonly ran: number
  readonly cacheHits: number
  readonly failed: number
}

/** A workspace under a temp root whose store, sandboxes and named caches are the root's too. */
const workspace = (config: unknown, files: Parameters<typeof writeTree>[1] = {}) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-passenv-")
    const ws = path.join(root, "ws")
    writeTree(ws, { "kiln.json": JSON.stringify(config), ...files })
    fs.mkdirSync(path.join(root, "sandboxes"))
    const base: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named"),
      KILN_LOCK_DIR: path.join(root, "locks"),
      KILN_NOOP_DEBUG: "1"
    }
    let runs = 0
    const kiln = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}) => {
      const summaryFile = path.join(root, `summary-${++runs}.json`)
      const withSummary = args[0] === "run" ? [...args, "--progress", "plain", "--summary", summaryFile] : args
      const r = spawnSync(process.execPath, [cli, ...withSummary], {
        cwd: ws,
        encoding: "utf8",
        env: { ...base, ...env }
      })
      const summary = fs.existsSync(summaryFile)
        ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary
        : undefined
      const check = /^kiln: no-op check: (.*)$/m.exec(r.stderr)?.[1]
      const said = r.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("kiln: no-op check:"))
      return { code: r.status, stdout: r.stdout, stderr: r.stderr, summary, check, said }
    }
    const read = (rel: string) => fs.readFileSync(path.join(ws, rel), "utf8")
    return { root, ws, kiln, read }
  })

const sourceOf = (s: Summary | undefined, name: string) => s?.processes.find((p) => p.name === name)?.source

/** Every regular file under `dir` that holds `needle`, its path relative to `dir`. */
const filesHolding = (dir: string, needle: string): Array<string> =>
  (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<fs.Dirent>)
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))
    .filter((f) => fs.readFileSync(f).includes(needle))
    .map((f) => path.relative(dir, f))

describe("passEnv, passThroughEnv and defaults", () => {
  it.scoped("a passEnv value is part of the key: a new one runs again, the no-op check sees it, explain names it", () =>
    Effect.gen(function*() {
      const { kiln, read } = yield* workspace({
        defaults: { env: { PATH }, passEnv: ["MODE=development"] },
        processes: { gen: { argv: ["/bin/sh", "-c", "echo \"$MODE\" > mode.txt"], outputs: ["mode.txt"] } }
      })
      const cold = kiln(["run"])
      assert.strictEqual(cold.code, 0, cold.stderr)
      assert.strictEqual(cold.summary?.ran, 1)
      // Unset, it has its default.
      assert.strictEqual(read("mode.txt"), "development\n")
      const same = kiln(["run"])
      assert.strictEqual(same.check, "nothing changed", same.stderr)

      const production = kiln(["run"], { MODE: "production" })
      assert.strictEqual(production.code, 0, production.stderr)
      assert.notStrictEqual(production.check, "nothing changed")
      assert.strictEqual(sourceOf(production.summary, "gen"), "ran")
      assert.strictEqual(read("mode.txt"), "production\n")
      assert.notStrictEqual(production.summary!.processes[0]!.actionDigest, cold.summary!.processes[0]!.actionDigest)
      assert.strictEqual(kiln(["run"], { MODE: "production" }).check, "nothing changed")

      const explained = kiln(["explain", "gen"], { MODE: "staging" })
      assert.strictEqual(explained.code, 0, explained.stderr)
      assert.include(explained.stdout, "env MODE: \"production\" -> \"staging\"")

      // Back to the default: the result of the first run, from the cache.
      const back = kiln(["run"])
      assert.strictEqual(back.code, 0, back.stderr)
      assert.strictEqual(sourceOf(back.summary, "gen"), "cache-hit")
      assert.strictEqual(read("mode.txt"), "development\n")
    }))

  it.scoped("a pass-through value is not: a new one is a cache hit, and no file kiln wrote holds one", () =>
    Effect.gen(function*() {
      const SECRET = "s3cr3t-value-0f-the-token"
      const { kiln, read, root } = yield* workspace({
        defaults: { env: { PATH } },
        processes: {
          use: {
            argv: ["/bin/sh", "-c", "test -n \"$TOKEN\" && printf %s \"$TOKEN\" | wc -c > length.txt"],
            outputs: ["length.txt"],
            passThroughEnv: ["TOKEN"]
          },
          fails: { argv: ["/bin/sh", "-c", "echo \"${TOKEN%-*}\" >&2; exit 3"], passThroughEnv: ["TOKEN"] }
        }
      })
      const trace = path.join(root, "trace.json")
      const first = kiln(["run", "--keep-going", "--keep-sandboxes", "always", "--trace", trace], { TOKEN: SECRET })
      assert.strictEqual(first.code, 1, first.stderr)
      assert.strictEqual(sourceOf(first.summary, "use"), "ran")
      assert.strictEqual(read("length.txt").trim(), String(SECRET.length))
      // The failure's re-run line names the variable, never its value.
      assert.include(first.stderr, "--env \"TOKEN=$TOKEN\"")

      const other = kiln(["run", "use"], { TOKEN: `${SECRET}-rotated` })
      assert.strictEqual(other.check, "nothing changed", other.stderr)
      const full = kiln(["run", "use", "--trace", trace], { TOKEN: `${SECRET}-rotated` })
      assert.strictEqual(full.code, 0, full.stderr)
      assert.strictEqual(sourceOf(full.summary, "use"), "cache-hit")
      assert.strictEqual(
        full.summary!.processes[0]!.actionDigest,
        first.summary!.processes.find((p) => p.name === "use")!.actionDigest
      )

      const explained = kiln(["explain", "use"], { TOKEN: SECRET })
      assert.strictEqual(explained.code, 0, explained.stderr)
      for (const r of [first, other, full, explained]) {
        assert.notInclude(r.stdout + r.stderr, SECRET)
      }
      // The store (records, memo, action cache, logs), the kept sandboxes, the summaries and the trace.
      assert.deepStrictEqual(filesHolding(root, SECRET), [])
      // The scan reads what kiln wrote: the variable's name is there (the memo, the records), only never its value.
      assert.isNotEmpty(filesHolding(path.join(root, "store"), "TOKEN"))
      assert.isNotEmpty(fs.readdirSync(path.join(root, "sandboxes")))
    }))

  it.scoped("a variable listed but unset, without a default, is an error at its place: every one of them, exit 2", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace({
        defaults: { env: { PATH }, passEnv: ["NODE_ENV"] },
        processes: { gen: { argv: ["/bin/true"], passThroughEnv: ["NPM_TOKEN"] } }
      })
      const unset = kiln(["run"])
      assert.strictEqual(unset.code, 2, unset.stderr)
      // kiln.json is one line here: each error's column on it.
      assert.deepStrictEqual(unset.said.filter((l) => l.startsWith("kiln: ")), [
        "kiln: kiln.json:1:56: defaults.passEnv[0]: \"NODE_ENV\" is not set in kiln's environment: set it, or give a " +
        "default (\"NODE_ENV=value\")",
        "kiln: kiln.json:1:128: processes.gen.passThroughEnv[0]: \"NPM_TOKEN\" is not set in kiln's environment: set " +
        "it, or give a default (\"NPM_TOKEN=value\")"
      ])
      const token = kiln(["run"], { NODE_ENV: "test" })
      assert.strictEqual(token.code, 2, token.stderr)
      assert.deepStrictEqual(token.said.filter((l) => l.startsWith("kiln: ")), [
        "kiln: kiln.json:1:128: processes.gen.passThroughEnv[0]: \"NPM_TOKEN\" is not set in kiln's environment: set " +
        "it, or give a default (\"NPM_TOKEN=value\")"
      ])
      assert.strictEqual(kiln(["run"], { NODE_ENV: "test", NPM_TOKEN: "x" }).code, 0)
    }))

  it.scoped("defaults reach explicit processes and the ones tasks give; a process's own env wins", () =>
    Effect.gen(function*() {
      const { kiln, read, ws } = yield* workspace({
        defaults: { env: { PATH, GREETING: "hello", WHO: "everyone" }, inputs: ["shared.txt"], timeout: "5m" },
        tasks: { build: { outputs: ["out.txt"], env: { WHO: "lib" } } },
        processes: {
          top: {
            argv: ["/bin/sh", "-c", "cat shared.txt > top.txt && echo \"$GREETING $WHO\" >> top.txt"],
            outputs: ["top.txt"]
          }
        }
      }, {
        "package.json": JSON.stringify({ name: "root", private: true, workspaces: ["packages/*"] }),
        "packages/lib/package.json": JSON.stringify({
          name: "lib",
          version: "1.0.0",
          scripts: { build: "cat ../../shared.txt > out.txt && echo \"$GREETING $WHO\" >> out.txt" }
        }),
        "shared.txt": "shared\n"
      })
      const run = kiln(["run"])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.strictEqual(read("top.txt"), "shared\nhello everyone\n")
      assert.strictEqual(read("packages/lib/out.txt"), "shared\nhello lib\n")
      // shared.txt is an input of both: an edit runs both again.
      fs.writeFileSync(path.join(ws, "shared.txt"), "edited\n")
      const edited = kiln(["run"])
      assert.strictEqual(edited.code, 0, edited.stderr)
      assert.strictEqual(edited.summary?.ran, 2, edited.stderr)
      assert.strictEqual(read("packages/lib/out.txt"), "edited\nhello lib\n")
    }))
})
