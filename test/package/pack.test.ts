/**
 * kiln as npm ships it: `npm pack` of this checkout (its dist/, built by `npm test` first), installed the ways users
 * install it, into temp prefixes: globally, then `kiln run` on the example workspace; and as a dependency of
 * another project, whose TypeScript imports kiln with its types. The tarball holds what runs: no large source map,
 * and an install brings one protobufjs and no file watcher (see scripts/vendor.mjs).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  checkout,
  cleanEnv,
  consumerProject,
  consumerTsconfig,
  installedPackages,
  npm,
  pack,
  sh,
  tsc
} from "../utils/pack.js"
import { tempDir } from "../utils/temp.js"

describe("the npm package", () => {
  it.scoped(
    "ships what runs: no source map over 1 MB (the CLI bundle's is for this checkout), no link to one it leaves out, " +
      "no unbundled program",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-pack-")
        const tarball = yield* pack(dir)
        const list = yield* sh("tar", ["-tzvf", tarball], dir)
        assert.strictEqual(list.code, 0, list.both)
        // `-rw-r--r-- 0/0 1234 2026-01-01 00:00 package/dist/kiln.cjs`: the size is the third field.
        const files = list.stdout.trim().split("\n").map((line) => line.trim().split(/\s+/))
        assert.isTrue(files.some((f) => f.at(-1) === "package/dist/kiln.cjs"), list.stdout)
        const bigMaps = files.filter((f) => f.at(-1)!.endsWith(".map") && Number(f[2]) > 1 << 20).map((f) => f.at(-1))
        assert.deepStrictEqual(bigMaps, [])
        // The programs run from the bundles (kiln.cjs, spawner.cjs, the native spawner), never from dist/programs/.
        assert.deepStrictEqual(files.map((f) => f.at(-1)!).filter((f) => f.startsWith("package/dist/programs/")), [])
        const unpacked = yield* sh("tar", ["-xzf", tarball, "-C", dir, "package/dist/kiln.cjs"], dir)
        assert.strictEqual(unpacked.code, 0, unpacked.both)
        assert.notInclude(
          fs.readFileSync(path.join(dir, "package/dist/kiln.cjs"), "utf8").slice(-4096),
          "sourceMappingURL"
        )
      }),
    120_000
  )

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
        const project = consumerProject(path.join(dir, "consumer"))
        // Only types and imports are looked at here: lmdb's prebuilt addon saves the build the global install makes.
        const install = yield* npm(["install", tarball], project, { ...cleanEnv(), KILN_LMDB_PREBUILT: "1" })
        assert.strictEqual(install.code, 0, install.both)
        // What the install brought: one protobufjs (grpc-js's proto-loader, with protobufjs 7, is not among kiln's
        // dependencies), no native file watcher (platform-node's), and effect as the project's own, once.
        const installed = installedPackages(project)
        assert.deepStrictEqual(installed.get("protobufjs")?.length, 1, JSON.stringify(installed.get("protobufjs")))
        for (const absent of ["@parcel/watcher", "@grpc/proto-loader", "@grpc/grpc-js", "@effect/platform-node"]) {
          assert.isFalse(installed.has(absent), `${absent} was installed`)
        }
        assert.deepStrictEqual(installed.get("effect")?.length, 1, JSON.stringify(installed.get("effect")))
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
        consumerTsconfig(project, ["main.ts"])
        const typecheck = yield* tsc(project)
        assert.strictEqual(typecheck.code, 0, typecheck.both)
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
