/**
 * kiln as npm ships it: `npm pack` of this checkout (its dist/, built by `npm test` first), installed the ways users
 * install it, into temp prefixes: globally, then `kiln run` on the example workspace; and as a dependency of
 * another project, whose TypeScript imports kiln with its types.
 *
 * The installs take what they can from npm's cache (`--prefer-offline`: every tarball, after the checkout's `npm ci`);
 * only package metadata npm has not cached yet (the first time on a machine) comes from the registry.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "../utils/temp.js"

const checkout = path.resolve(".")

/** The environment without what `npm test` and the developer's shell set for npm and kiln. */
const cleanEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|KILN_)/i.test(k)))

/** Runs a command to its end without blocking the test worker (an install takes a minute; vitest's RPC must not wait). */
const sh = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = cleanEnv()) =>
  Effect.async<{ code: number | null; stdout: string; stderr: string; both: string }>((resume) => {
    const child = execFile(
      command,
      args,
      { cwd, env, encoding: "utf8", maxBuffer: 64 << 20 },
      (error, stdout, stderr) =>
        resume(Effect.succeed({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          stdout,
          stderr,
          both: `${stdout}\n${stderr}`
        }))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const npm = (args: ReadonlyArray<string>, cwd: string, env?: NodeJS.ProcessEnv) =>
  sh("npm", [...args, "--prefer-offline", "--no-audit", "--no-fund"], cwd, env)

/** The tarball `npm pack` makes of this checkout, in `dir`. */
const pack = (dir: string) =>
  Effect.gen(function*() {
    const r = yield* sh("npm", ["pack", "--pack-destination", dir], checkout)
    assert.strictEqual(r.code, 0, r.both)
    const tarball = path.join(dir, r.stdout.trim().split("\n").at(-1)!)
    assert.isTrue(fs.existsSync(tarball), tarball)
    return tarball
  })

describe("the npm package", () => {
  it.scoped("installs globally, and its kiln runs the example workspace", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-pack-")
      const tarball = yield* pack(dir)
      const prefix = path.join(dir, "global")
      const install = yield* npm(["install", "-g", "--prefix", prefix, tarball], dir)
      assert.strictEqual(install.code, 0, install.both)
      // The install built lmdb's addon with kiln's fixes (the postinstall script is in the package).
      assert.isTrue(
        fs.existsSync(path.join(prefix, "lib/node_modules/kiln/node_modules/lmdb/build/Release/kiln-lmdb-fixes")),
        install.both
      )
      const ws = path.join(dir, "workspace")
      fs.cpSync(path.join(checkout, "examples/workspace"), ws, {
        recursive: true,
        filter: (src) => !/\/(gen|build|dist)$/.test(src)
      })
      const kiln = path.join(prefix, "bin/kiln")
      const run = () =>
        sh(kiln, [
          "run",
          "--config",
          path.join(ws, "kiln.json"),
          "--store-dir",
          path.join(dir, "store"),
          "--sandbox-root",
          dir,
          "--progress",
          "plain"
        ], dir)
      const first = yield* run()
      assert.strictEqual(first.code, 0, first.both)
      assert.match(first.stderr, /kiln: 5 processes: 5 ran, 0 cached, 0 failed/)
      assert.notInclude(first.stderr, "warning", "the installed kiln runs lmdb's addon with kiln's fixes")
      const second = yield* run()
      assert.strictEqual(second.code, 0, second.both)
      assert.match(second.stderr, /kiln: 5 processes: 0 ran, 5 cached, 0 failed/)
      const help = yield* sh(kiln, ["--help"], dir)
      assert.strictEqual(help.code, 0, help.both)
      assert.match(help.stdout, /^kiln: a hermetic process-execution engine/)
    }), 600_000)

  it.scoped(
    "installs as a dependency whose TypeScript imports Store and ProcessRunner with their types",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-pack-")
        const tarball = yield* pack(dir)
        const project = path.join(dir, "consumer")
        fs.mkdirSync(project)
        fs.writeFileSync(
          path.join(project, "package.json"),
          JSON.stringify({ name: "consumer", private: true, type: "module" })
        )
        // Only types and imports are looked at here: lmdb's prebuilt addon saves the build the global install makes.
        const install = yield* npm(["install", tarball], project, { ...cleanEnv(), KILN_LMDB_PREBUILT: "1" })
        assert.strictEqual(install.code, 0, install.both)
        fs.writeFileSync(
          path.join(project, "main.ts"),
          [
            `import { Effect, Layer } from "effect"`,
            `import { Digest, Process, ProcessRunner, Sandboxer, Sandboxes, Store } from "kiln"`,
            ``,
            `const kiln: Layer.Layer<ProcessRunner.ProcessRunner | Store.Store, unknown> = ProcessRunner.layer().pipe(`,
            `  Layer.provideMerge(Layer.mergeAll(Sandboxer.layer(), Sandboxes.layer())),`,
            `  Layer.provideMerge(Store.layer())`,
            `)`,
            `export const exitCode: Effect.Effect<number | null, unknown> = Effect.flatMap(ProcessRunner.ProcessRunner, (r) =>`,
            `  r.run(new Process.Process({ argv: ["/bin/true"], inputDigest: Digest.empty }))`,
            `).pipe(Effect.map((result) => result.exitCode), Effect.provide(kiln))`,
            ``,
            `// @ts-expect-error a Process needs its argv: the package's types are kiln's, not \`any\``,
            `export const wrong = new Process.Process({ inputDigest: Digest.empty })`,
            ``
          ].join("\n")
        )
        fs.writeFileSync(
          path.join(project, "tsconfig.json"),
          JSON.stringify({
            compilerOptions: {
              module: "NodeNext",
              moduleResolution: "NodeNext",
              target: "ES2022",
              strict: true,
              noEmit: true,
              skipLibCheck: true,
              // kiln's types use Node's (Buffer, NodeJS.ProcessEnv), as any Node library's do.
              typeRoots: [path.join(checkout, "node_modules/@types")],
              types: ["node"]
            },
            files: ["main.ts"]
          })
        )
        const tsc = yield* sh(
          process.execPath,
          [path.join(checkout, "node_modules/typescript/bin/tsc"), "-p", "."],
          project
        )
        assert.strictEqual(tsc.code, 0, tsc.both)
        // And the same names at run time, from the package's ES modules.
        const load = yield* sh(
          process.execPath,
          [
            "--input-type=module",
            "-e",
            `const k = await import("kiln"); console.log(typeof k.Store.layer, typeof k.ProcessRunner.layer)`
          ],
          project,
          { ...cleanEnv(), KILN_LMDB_PREBUILT: "1" }
        )
        assert.strictEqual(load.code, 0, load.both)
        assert.strictEqual(load.stdout.trim(), "function function")
      }),
    600_000
  )
})
