/**
 * Where processes run: at one path (`MountNamespace.EXEC_ROOT`) wherever this machine can pin it, so that a tool
 * writing its own path into its outputs writes the same bytes in every checkout, store and run; at their sandbox's
 * own path where it cannot (or `KILN_MOUNT_NAMESPACES=0`), under another key. Real stores, sandboxes and processes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse } from "../../src/domain/config/Config.js"
import * as Engine from "../../src/layers/engine/Engine.js"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import { cli, stack } from "../utils/stack.js"
import { tempDir, writeTree } from "../utils/temp.js"

const pinned = ProcessRunner.execRoot()

/**
 * Writes what a tool that embeds its own path would: its working directory, the real path of an input, a
 * source-map-like file naming its output by absolute path, and a `{chroot}` variable.
 */
const build = {
  argv: [
    "/bin/sh",
    "-c",
    [
      "mkdir -p dist",
      "pwd > dist/pwd.txt",
      "realpath ../../src/in.txt > dist/real.txt",
      `printf '{"version":3,"file":"%s/dist/index.cjs","sources":["%s"]}\\n' "$PWD" "$(realpath ../../src/in.txt)" > dist/index.cjs.map`,
      "echo \"$OUT\" > dist/env.txt"
    ].join(" && ")
  ],
  env: { PATH: "/usr/bin:/bin", OUT: "{chroot}/packages/p/dist" },
  workingDirectory: "packages/p",
  inputs: ["src/in.txt"],
  outputs: ["dist/"]
}

/** A checkout of the workspace at `under` (its own store, sandboxes and named caches beside it). */
const checkout = (under: string) => {
  const workspace = path.join(under, "ws")
  writeTree(workspace, { "src/in.txt": "in\n", "packages/p/.keep": "" })
  fs.mkdirSync(path.join(under, "sandboxes"))
  return workspace
}

const config = (processes: Record<string, unknown>) =>
  Either.getOrThrow(parse("kiln.json", JSON.stringify({ processes })))

/** Runs `processes` in a checkout under `root`, on a whole stack of its own there. */
const runIn = (root: string, processes: Record<string, unknown>, runner: ProcessRunner.Options = {}) =>
  Effect.gen(function*() {
    const workspace = checkout(root)
    const report = yield* Effect.flatMap(
      Engine.Engine,
      (engine) => engine.run({ workspace, config: config(processes) })
    ).pipe(
      Effect.provide(Engine.layer.pipe(Layer.provideMerge(stack({ root, inProcess: true, runner }))))
    )
    return { report, workspace }
  })

const outputsOf = (workspace: string) =>
  Object.fromEntries(
    fs.readdirSync(path.join(workspace, "packages/p/dist")).map((f) => [
      f,
      fs.readFileSync(path.join(workspace, "packages/p/dist", f), "utf8")
    ])
  )

describe("the exec root", () => {
  it.effect("this machine pins it (root or user namespaces)", () =>
    Effect.sync(() => assert.strictEqual(pinned, "/mnt")))

  it.scopedLive(
    "one action in two checkouts at different paths, each with its own store: the same bytes, the same key",
    () =>
      Effect.gen(function*() {
        const one = yield* runIn(yield* tempDir("kiln-exec-root-a-"), { build })
        const two = yield* runIn(path.join(yield* tempDir("kiln-exec-root-b-"), "deeper", "checkout"), { build })
        for (const { report } of [one, two]) {
          assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
          assert.strictEqual(report.processes[0]!.source, "ran")
        }
        const bytes = outputsOf(one.workspace)
        assert.deepStrictEqual(bytes, {
          "env.txt": `${pinned}/packages/p/dist\n`,
          "index.cjs.map":
            `{"version":3,"file":"${pinned}/packages/p/dist/index.cjs","sources":["${pinned}/src/in.txt"]}\n`,
          "pwd.txt": `${pinned}/packages/p\n`,
          "real.txt": `${pinned}/src/in.txt\n`
        })
        assert.deepStrictEqual(outputsOf(two.workspace), bytes)
        assert.strictEqual(one.report.processes[0]!.actionDigest, two.report.processes[0]!.actionDigest)
      })
  )

  it.scopedLive("a shared tree is mounted under it, read-only", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-exec-root-shared-")
      writeTree(path.join(root, "ws"), { "tools/a.txt": "a\n", "tools/b.txt": "b\n", "tools/c.txt": "c\n" })
      const { report, workspace } = yield* runIn(root, {
        use: {
          argv: [
            "/bin/sh",
            "-c",
            "{ cat tools/a.txt; realpath tools/a.txt; pwd; if touch tools/new 2>/dev/null; then echo writable; else echo read-only; fi; } > out.txt"
          ],
          env: { PATH: "/usr/bin:/bin" },
          inputs: ["tools/**"],
          outputs: ["out.txt"]
        }
      }, { sharedTreeMinFiles: 3 })
      assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
      assert.strictEqual(
        fs.readFileSync(path.join(workspace, "out.txt"), "utf8"),
        `a\n${pinned}/tools/a.txt\n${pinned}\nread-only\n`
      )
    }))

  it.scopedLive(
    "a tool making a directory in a shared tree fails with a hint naming writableInputs; declared, it runs there",
    () =>
      Effect.gen(function*() {
        const tree = { "node_modules/a.txt": "a\n", "node_modules/b.txt": "b\n", "node_modules/c.txt": "c\n" }
        const vite = (writableInputs: ReadonlyArray<string>) => ({
          test: {
            argv: [
              "/bin/sh",
              "-c",
              "mkdir -p node_modules/.vite-temp && echo built > node_modules/.vite-temp/c.mjs && cat node_modules/.vite-temp/c.mjs node_modules/a.txt > out.txt"
            ],
            env: { PATH: "/usr/bin:/bin" },
            inputs: ["node_modules/**"],
            outputs: ["out.txt"],
            writableInputs
          }
        })
        const failing = yield* tempDir("kiln-exec-root-erofs-")
        writeTree(path.join(failing, "ws"), tree)
        const failed = yield* runIn(failing, vite([]), { sharedTreeMinFiles: 3 })
        assert.strictEqual(failed.report.failed, 1)
        const detail = failed.report.processes[0]!.detail ?? ""
        assert.match(detail, /Read-only file system/)
        assert.include(detail, `"writableInputs": ["node_modules/.vite-temp"]`)

        const declared = yield* tempDir("kiln-exec-root-writable-")
        writeTree(path.join(declared, "ws"), tree)
        const { report, workspace } = yield* runIn(declared, vite(["node_modules/.vite-temp"]), {
          sharedTreeMinFiles: 3
        })
        assert.strictEqual(report.failed, 0, JSON.stringify(report.processes))
        assert.strictEqual(fs.readFileSync(path.join(workspace, "out.txt"), "utf8"), "built\na\n")
        // Its writes were the sandbox's: the workspace's tree is as it was.
        assert.deepStrictEqual(fs.readdirSync(path.join(workspace, "node_modules")).sort(), ["a.txt", "b.txt", "c.txt"])
      })
  )

  it.scopedLive("KILN_MOUNT_NAMESPACES=0: the process runs at its sandbox's own path, under another key", () =>
    Effect.gen(function*() {
      /** The CLI in the checkout under `root`, with its own store there, and `env`. */
      const kiln = (root: string, args: ReadonlyArray<string>, env: Record<string, string>) => {
        const r = childProcess.spawnSync(process.execPath, [cli, ...args], {
          cwd: path.join(root, "ws"),
          encoding: "utf8",
          env: {
            ...process.env,
            KILN_STORE_DIR: path.join(root, "store"),
            KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
            KILN_NAMED_CACHES_DIR: path.join(root, "named_caches"),
            ...env
          }
        })
        assert.strictEqual(r.status, 0, r.stderr)
        return r.stdout
      }
      /** `kiln run` in a checkout of its own, with `env`: the summary's one process, and its outputs. */
      const run = (root: string, env: Record<string, string>) => {
        const workspace = checkout(root)
        fs.writeFileSync(path.join(workspace, "kiln.json"), JSON.stringify({ processes: { build } }))
        const summary = path.join(root, "summary.json")
        kiln(root, ["run", "--summary", summary], env)
        const { processes } = JSON.parse(fs.readFileSync(summary, "utf8")) as {
          processes: ReadonlyArray<{ actionDigest: string; source: string }>
        }
        assert.strictEqual(processes[0]!.source, "ran")
        return { process: processes[0]!, outputs: outputsOf(workspace) }
      }
      const offRoot = yield* tempDir("kiln-exec-root-off-")
      const off = run(offRoot, { KILN_MOUNT_NAMESPACES: "0" })
      const wd = off.outputs["pwd.txt"]!
      assert.match(wd, new RegExp(`^${path.join(offRoot, "sandboxes")}/.+/packages/p\\n$`))
      assert.strictEqual(off.outputs["env.txt"], `${wd.trim()}/dist\n`)
      const on = run(yield* tempDir("kiln-exec-root-on-"), {})
      assert.strictEqual(on.outputs["pwd.txt"], `${pinned}/packages/p\n`)
      assert.notStrictEqual(on.process.actionDigest, off.process.actionDigest)
      // What explain says of the checkout that ran without, once namespaces are on again.
      assert.include(kiln(offRoot, ["explain", "build"], {}), `  runs at: its sandbox's own path -> ${pinned}\n`)
    }))
})
