/**
 * The sandbox's hints in a failed process's report, on the text tools print: the network hint only where the process
 * had none (the strict sandbox, no `"network": true`), for each way a lookup or a connection fails; the undeclared-read
 * hint for workspace files named by absolute path (at the exec root or the workspace's own) or relative to the
 * working directory, never for a declared input, a dep's output, a directory, or a path outside.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Config } from "../../src/domain/config/Config.js"
import * as Digest from "../../src/domain/Digest.js"
import { Process, ProcessResult } from "../../src/domain/Process.js"
import { networkHint, undeclaredHints } from "../../src/layers/engine/internal/sandboxHints.js"

const proc = (extra: Partial<ConstructorParameters<typeof Process>[0]> = {}) =>
  new Process({ argv: ["tool"], env: {}, inputDigest: Digest.empty, ...extra })

const result = (sandbox?: "strict" | "mount" | "none") =>
  new ProcessResult({
    exitCode: 1,
    signal: null,
    timedOut: false,
    stdoutDigest: Digest.empty,
    stderrDigest: Digest.empty,
    outputDigest: Digest.empty,
    actionDigest: Digest.empty,
    durationMs: 1,
    source: "ran",
    timings: {},
    ...(sandbox !== undefined ? { sandbox } : {})
  })

describe("networkHint", () => {
  const tails = [
    "npm ERR! code EAI_AGAIN",
    "Error: getaddrinfo ENOTFOUND registry.npmjs.org",
    "Error: connect ECONNREFUSED 127.0.0.1:5432",
    "connect: Network is unreachable",
    "ssh: Temporary failure in name resolution",
    "curl: (6) Could not resolve host: example.com",
    "dial tcp: connect: ENETUNREACH"
  ]

  it("names the fix where the strict sandbox took the network away", () => {
    for (const tail of tails) {
      assert.strictEqual(
        networkHint("fetch", tail, proc(), result("strict")),
        "hint: fetch runs without network: add \"network\": true to it in kiln.json if it needs one",
        tail
      )
    }
  })

  it("nothing where the process had the network, or failed otherwise", () => {
    for (const tail of tails) {
      assert.isUndefined(networkHint("fetch", tail, proc({ network: true }), result("strict")))
      assert.isUndefined(networkHint("fetch", tail, proc(), result("mount")))
      assert.isUndefined(networkHint("fetch", tail, proc(), result()))
    }
    assert.isUndefined(networkHint("fetch", "expected 1 to equal 2", proc(), result("strict")))
  })
})

describe("undeclaredHints", () => {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-hints-"))
  afterAll(() => fs.rmSync(ws, { recursive: true, force: true }))
  for (
    const rel of [
      "src/a.ts",
      "src/b.ts",
      "src/gen.ts",
      "pkg/lib/c.ts",
      "dist/d.js",
      "vendor/x.ts",
      "vendor/y.ts",
      "vendor/z.ts",
      "vendor/w.ts"
    ]
  ) {
    fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true })
    fs.writeFileSync(path.join(ws, rel), "")
  }
  const config = {
    processes: {
      t: { argv: ["tool"], inputs: ["src/**", "!src/b.ts"], deps: ["build"], workingDirectory: "pkg" },
      build: { argv: ["b"], outputs: ["dist/"] },
      gen: { argv: ["g"], outputs: ["gen/version.ts", "?cov/"] }
    }
  } as unknown as Config
  const hints = (tail: string, extra: Partial<ConstructorParameters<typeof Process>[0]> = {}) =>
    undeclaredHints("t", tail, proc({ workingDirectory: "pkg", ...extra }), config, ws)

  it("an excluded input, by exec-root path, workspace path or relative to the working directory", () => {
    // Taken by a glob but left out by an exclusion (a task's gives one for what a .gitignore ignores): it is named.
    assert.deepStrictEqual(hints("Cannot find module '/mnt/src/b.ts'", { execRoot: "/mnt" }), [
      "hint: t mentions src/b.ts, which its inputs leave out (\"!src/b.ts\")"
    ])
    assert.deepStrictEqual(hints(`ENOENT: no such file or directory, open '${ws}/vendor/x.ts'`), [
      "hint: t mentions vendor/x.ts, which is not among its inputs"
    ])
    assert.deepStrictEqual(hints("error: lib/c.ts:3:1: cannot read"), [
      "hint: t mentions pkg/lib/c.ts, which is not among its inputs"
    ])
  })

  it("nothing for inputs, deps' outputs, directories, missing files, or paths outside", () => {
    assert.deepStrictEqual(hints("failed in /mnt/src/a.ts and ../src/gen.ts", { execRoot: "/mnt" }), [])
    assert.deepStrictEqual(hints("../dist/d.js: bad"), [])
    assert.deepStrictEqual(hints("../src is a directory; ../nope.ts is missing; /etc/passwd; ../../x.ts"), [])
  })

  it("a path another process makes (not a dep), there or not yet: that process is the dep to add", () => {
    assert.deepStrictEqual(hints("Cannot find module '../gen/version.ts'"), [
      "hint: gen/version.ts is an output of gen: add \"gen\" to the deps of t"
    ])
    assert.deepStrictEqual(hints("ENOENT: ../cov/lcov.info"), [
      "hint: cov/lcov.info is an output of gen: add \"gen\" to the deps of t"
    ])
  })

  it("at most three, each once", () => {
    assert.deepStrictEqual(hints(`../vendor/x.ts ${ws}/vendor/x.ts ../vendor/y.ts ../vendor/z.ts ../vendor/w.ts`), [
      "hint: t mentions vendor/x.ts, which is not among its inputs",
      "hint: t mentions vendor/y.ts, which is not among its inputs",
      "hint: t mentions vendor/z.ts, which is not among its inputs"
    ])
  })
})
