/**
 * The sandbox's declarations and options through the built CLI (#37), on real runs in temp workspaces: `--sandbox`
 * (read directly and through @effect/cli) and kiln.json's `"sandbox"`, the flag winning; the run memo kept per mode;
 * the sandbox each process had in `--summary` and `--trace`; `hostPaths` refused with one line; and the hints in a
 * failed process's report: the workspace files it names that it did not declare, and the network it was denied.
 * Where the strict sandbox is (or is not) available is read from the summary, so the same assertions hold on a machine
 * with it and one without.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { cli } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

interface SummaryProcess {
  readonly name: string
  readonly source: string
  readonly exitCode: number | null
  readonly sandbox: string | null
}
interface Summary {
  readonly processes: ReadonlyArray<SummaryProcess>
  readonly ran: number
  readonly cacheHits: number
}

const KINDS = ["strict", "mount", "none"]

/** A workspace under a temp root whose store, sandboxes and named caches are the root's too. */
const workspace = (config: unknown, files: Parameters<typeof writeTree>[1] = {}) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-sandbox-")
    const ws = path.join(root, "ws")
    writeTree(ws, { "kiln.json": JSON.stringify(config), ...files })
    fs.mkdirSync(path.join(root, "sandboxes"))
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      KILN_STORE_DIR: path.join(root, "store"),
      KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(root, "named"),
      KILN_LOCK_DIR: path.join(root, "locks"),
      KILN_NOOP_DEBUG: "1"
    }
    let runs = 0
    const kiln = (args: ReadonlyArray<string>) => {
      const summaryFile = path.join(root, `summary-${++runs}.json`)
      const withSummary = args[0] === "run" ? [...args, "--progress", "plain", "--summary", summaryFile] : args
      const r = spawnSync(process.execPath, [cli, ...withSummary], { cwd: ws, encoding: "utf8", env })
      const summary = fs.existsSync(summaryFile)
        ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary
        : undefined
      const check = /^kiln: no-op check: (.*)$/m.exec(r.stderr)?.[1]
      // What kiln said, less the no-op check's debug line and the indented lines that quote kiln.json under an error.
      const said = r.stderr.split("\n").filter((l) =>
        l !== "" && !l.startsWith("kiln: no-op check:") && !l.startsWith(" ")
      )
      return { code: r.status, stdout: r.stdout, stderr: r.stderr, summary, check, said }
    }
    return { root, ws, kiln }
  })

const processIn = (s: Summary | undefined, name: string): SummaryProcess => {
  const p = s?.processes.find((q) => q.name === name)
  assert.isDefined(p, `${name} is not in the summary`)
  return p!
}

describe("kiln run --sandbox", () => {
  it.scoped("the summary says the sandbox each process had; a hit had none; the memo is kept per mode", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace({
        processes: { a: { argv: ["/bin/sh", "-c", "cat a.txt > out.txt"], inputs: ["a.txt"], outputs: ["out.txt"] } }
      }, { "a.txt": "a" })
      const first = kiln(["run", "--sandbox", "off"])
      assert.strictEqual(first.code, 0, first.stderr)
      const ran = processIn(first.summary, "a")
      assert.strictEqual(ran.source, "ran")
      // Off is never the strict view; which of the others depends on whether this machine pins the exec root.
      assert.include(["mount", "none"], ran.sandbox)
      const again = kiln(["run", "--sandbox=off"])
      assert.strictEqual(again.check, "nothing changed", again.stderr)
      assert.isNull(processIn(again.summary, "a").sandbox)
      // Another mode: the memo of off does not answer it, though the key (and so the cache hit) is the same.
      const auto = kiln(["run"])
      assert.match(auto.check ?? "", /no run memo .*under --sandbox auto/)
      assert.strictEqual(auto.code, 0, auto.stderr)
      assert.strictEqual(processIn(auto.summary, "a").source, "cache-hit")
      assert.isNull(processIn(auto.summary, "a").sandbox)
      assert.strictEqual(kiln(["run"]).check, "nothing changed")
      // The flag is read by @effect/cli too (with an option the direct reader leaves to it).
      const traced = kiln(["run", "--sandbox", "off", "--cache", "write", "--trace", "trace.json"])
      assert.strictEqual(traced.code, 0, traced.stderr)
      assert.include(KINDS, processIn(traced.summary, "a").sandbox)
      const bad = kiln(["run", "--sandbox", "loose"])
      assert.notStrictEqual(bad.code, 0)
      assert.isUndefined(bad.summary)
    }))

  it.scoped("--trace says which sandbox a process that ran had", () =>
    Effect.gen(function*() {
      const { kiln, root } = yield* workspace({ processes: { a: { argv: ["/bin/true"] } } })
      const trace = path.join(root, "trace.json")
      const r = kiln(["run", "--sandbox", "off", "--trace", trace])
      assert.strictEqual(r.code, 0, r.stderr)
      const events = (JSON.parse(fs.readFileSync(trace, "utf8")) as {
        traceEvents: Array<{ name: string; cat?: string; args?: { sandbox?: string } }>
      }).traceEvents
      const span = events.find((e) => e.name === "a" && e.cat === "process")
      assert.include(["mount", "none"], span?.args?.sandbox)
    }))

  it.scoped("kiln.json's \"sandbox\": strict runs strictly or is refused in one line; the flag wins over it", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace({ sandbox: "strict", processes: { a: { argv: ["/bin/true"] } } })
      const strict = kiln(["run"])
      if (strict.code === 0) {
        assert.strictEqual(processIn(strict.summary, "a").sandbox, "strict")
      } else {
        assert.strictEqual(strict.code, 2, strict.stderr)
        assert.deepStrictEqual(strict.said.length, 1, strict.stderr)
        assert.match(
          strict.said[0]!,
          /^kiln: kiln\.json's "sandbox": "strict": this machine cannot give processes the strict sandbox: .+/
        )
      }
      // Not from the cache (a strict run above may have stored it: the mode is not part of the key).
      const off = kiln(["run", "--sandbox", "off", "--cache", "off"])
      assert.strictEqual(off.code, 0, off.stderr)
      assert.include(["mount", "none"], processIn(off.summary, "a").sandbox)
    }))

  it.scoped("kiln exec takes --sandbox", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace({ processes: {} })
      const r = kiln(["exec", "--sandbox", "off", "--json", "--", "/bin/true"])
      assert.strictEqual(r.code, 0, r.stderr)
      const bad = kiln(["exec", "--sandbox", "loose", "--", "/bin/true"])
      assert.notStrictEqual(bad.code, 0)
      const strict = kiln(["exec", "--sandbox", "strict", "--", "/bin/true"])
      if (strict.code !== 0) {
        assert.strictEqual(strict.code, 2, strict.stderr)
        assert.strictEqual(strict.said.length, 1, strict.stderr)
        assert.match(
          strict.said[0]!,
          /^kiln: --sandbox strict: this machine cannot give processes the strict sandbox: /
        )
      }
    }))
})

describe("kiln.json's hostPaths and network", () => {
  it.scoped("a host path that is relative, or in the workspace, is one line naming the field, exit 2", () =>
    Effect.gen(function*() {
      const relative = yield* workspace({ processes: { a: { argv: ["/bin/true"], hostPaths: ["opt/x"] } } })
      const r = relative.kiln(["run"])
      assert.strictEqual(r.code, 2, r.stderr)
      assert.strictEqual(r.said.length, 1, r.stderr)
      assert.match(
        r.said[0]!,
        /^kiln: kiln\.json:\d+:\d+: processes\.a\.hostPaths\[0\]: "opt\/x" must be an absolute path \(a directory or file of the host\)$/
      )
      const inside = yield* workspace({ processes: { a: { argv: ["/bin/true"] } } })
      fs.writeFileSync(
        path.join(inside.ws, "kiln.json"),
        JSON.stringify({ processes: { a: { argv: ["/bin/true"], hostPaths: [path.join(inside.ws, "tools")] } } })
      )
      const i = inside.kiln(["run"])
      assert.strictEqual(i.code, 2, i.stderr)
      assert.strictEqual(i.said.length, 1, i.stderr)
      assert.match(
        i.said[0]!,
        /^kiln: kiln\.json(:\d+:\d+)?: processes\.a\.hostPaths\[0\]: ".*\/tools" is inside the workspace/
      )
    }))

  it.scoped("declaring either changes the key, and explain says so; the same declaration again is a hit", () =>
    Effect.gen(function*() {
      const { kiln, ws } = yield* workspace({ processes: { a: { argv: ["/bin/true"] } } })
      const sourceOf = (r: ReturnType<typeof kiln>) => processIn(r.summary, "a").source
      const write = (pc: object) =>
        fs.writeFileSync(
          path.join(ws, "kiln.json"),
          JSON.stringify({ processes: { a: { argv: ["/bin/true"], ...pc } } })
        )
      assert.strictEqual(sourceOf(kiln(["run", "--sandbox", "off"])), "ran")
      write({ network: true })
      assert.include(kiln(["explain", "a"]).stdout, "network: off -> on")
      assert.strictEqual(sourceOf(kiln(["run", "--sandbox", "off"])), "ran")
      write({ network: true, hostPaths: ["/opt/kiln-test-toolchain"] })
      assert.include(kiln(["explain", "a"]).stdout, "hostPaths: [] -> [\"/opt/kiln-test-toolchain\"]")
      assert.strictEqual(sourceOf(kiln(["run", "--sandbox", "off"])), "ran")
      write({})
      assert.strictEqual(sourceOf(kiln(["run", "--sandbox", "off"])), "cache-hit")
    }))
})

describe("hints in a failed process's report", () => {
  it.scoped("each workspace file its output names that is not among its inputs, and no declared one", () =>
    Effect.gen(function*() {
      const { kiln } = yield* workspace({
        processes: {
          a: {
            argv: ["/bin/sh", "-c", "cat src/a.ts src/secret.ts; echo 'see lib/util.ts and src/a.ts'; exit 1"],
            inputs: ["src/a.ts"]
          }
        }
      }, { "src/a.ts": "a", "src/secret.ts": "s", "lib/util.ts": "u" })
      const r = kiln(["run", "--sandbox", "off"])
      assert.strictEqual(r.code, 1, r.stderr)
      const hints = r.said.filter((l) => l.startsWith("hint: "))
      assert.deepStrictEqual(hints, [
        "hint: a mentions src/secret.ts, which is not among its inputs",
        "hint: a mentions lib/util.ts, which is not among its inputs"
      ])
    }))

  it.scoped("a failed name lookup or refused connection: the network hint where the process had none", () =>
    Effect.gen(function*() {
      const failing = (network: boolean) => ({
        argv: [
          "/bin/sh",
          "-c",
          "echo 'curl: (6) Could not resolve host: example.invalid' >&2; echo 'Error: connect ECONNREFUSED 127.0.0.1:9'; exit 6"
        ],
        ...(network ? { network: true } : {})
      })
      const { kiln } = yield* workspace({ processes: { off: failing(false), on: failing(true) } })
      const r = kiln(["run", "--keep-going"])
      assert.strictEqual(r.code, 1, r.stderr)
      const hints = r.said.filter((l) => l.startsWith("hint: "))
      // Only the strict sandbox takes the network away: elsewhere the process had it, and there is nothing to hint.
      const strict = processIn(r.summary, "off").sandbox === "strict"
      assert.deepStrictEqual(
        hints,
        strict ? ["hint: off runs without network: add \"network\": true to it in kiln.json if it needs one"] : []
      )
      const offAgain = kiln(["run", "--sandbox", "off", "--keep-going"])
      assert.deepStrictEqual(offAgain.said.filter((l) => l.startsWith("hint: ")), [])
    }))
})
