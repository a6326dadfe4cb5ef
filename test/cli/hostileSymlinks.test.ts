/**
 * Symlinks that would take kiln outside the workspace, end to end through the built CLI: a process that makes its
 * declared output directory a symlink, or an output symlink that points out of its working directory, and a kiln.json
 * whose working directory, named cache or output parent goes through a symlink committed in the workspace. Each is
 * one line on stderr naming the process and the output or field, and nothing outside the test's temp directory is
 * touched.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type CliResult, failsWith, runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

type Result = CliResult

/** A temp root with a workspace holding `config` and `files`, and where kiln's store and sandboxes go. */
const setup = (config: unknown, files: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const root = yield* tempDir("kiln-symlinks-")
    const ws = path.join(root, "ws")
    fs.mkdirSync(ws)
    fs.writeFileSync(path.join(ws, "kiln.json"), JSON.stringify(config))
    for (const [rel, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true })
      fs.writeFileSync(path.join(ws, rel), content)
    }
    // What a hostile link points at: inside the test's temp root, never a system path.
    const outside = path.join(root, "outside")
    fs.mkdirSync(outside)
    fs.writeFileSync(path.join(outside, "precious.txt"), "precious\n")
    fs.mkdirSync(path.join(root, "sandboxes"))
    return { root, ws, outside }
  })

type Dirs = Effect.Effect.Success<ReturnType<typeof setup>>

/** `kiln run` to its end, with the test's own store, sandboxes and home. */
const run = (dirs: Dirs, extra: ReadonlyArray<string> = []): Effect.Effect<Result> =>
  runCli(["run", "--progress", "plain", ...extra], {
    cwd: dirs.ws,
    env: {
      ...process.env,
      HOME: dirs.root,
      KILN_STORE_DIR: path.join(dirs.root, "store"),
      KILN_SANDBOX_ROOT: path.join(dirs.root, "sandboxes"),
      KILN_NAMED_CACHES_DIR: path.join(dirs.root, "named")
    }
  })

const sh = (script: string) => ({ argv: ["/bin/sh", "-c", script], env: { PATH: "/usr/bin:/bin" } })

const untouched = (dirs: Dirs) =>
  assert.deepStrictEqual(fs.readdirSync(dirs.outside), ["precious.txt"], "the directory outside was touched")

describe("output symlinks a process makes", () => {
  it.scoped("a declared output directory made as a symlink is an InvalidOutput naming it; its target is untouched", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({})
      fs.writeFileSync(
        path.join(dirs.ws, "kiln.json"),
        JSON.stringify({ processes: { gen: { ...sh(`ln -s ${dirs.outside} out`), outputs: ["out/"] } } })
      )
      failsWith(
        yield* run(dirs),
        1,
        /^✗ gen: output `out\/` is declared as a directory, but the process made a symlink there \(to `.*outside`\)$/
      )
      untouched(dirs)
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "out")))
    }))

  it.scoped("an absolute output symlink is refused, unless kiln.json allows it for that process", () =>
    Effect.gen(function*() {
      const target = "/etc/passwd"
      const config = (allow: boolean) => ({
        processes: {
          gen: { ...sh(`ln -s ${target} f.txt`), outputs: ["f.txt"], ...(allow ? { outputSymlinks: "any" } : {}) }
        }
      })
      const dirs = yield* setup(config(false))
      failsWith(
        yield* run(dirs),
        1,
        /^✗ gen: output `f\.txt` is a symlink to `\/etc\/passwd`, which leads out of the working directory \(an absolute target\); `"outputSymlinks": "any"` in kiln\.json allows it$/
      )
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "f.txt")))
      fs.writeFileSync(path.join(dirs.ws, "kiln.json"), JSON.stringify(config(true)))
      const allowed = yield* run(dirs)
      assert.strictEqual(allowed.code, 0, allowed.stderr)
      assert.strictEqual(fs.readlinkSync(path.join(dirs.ws, "f.txt")), target)
    }))

  it.scoped("a symlink inside an output directory that climbs out (or chains out) is refused; contained ones are kept", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({
        processes: {
          ok: {
            // What npm and pnpm make: `..` no further up than the link's own depth, then names.
            ...sh(
              "mkdir -p nm/.bin nm/.pnpm/x/node_modules/x && ln -s ../.pnpm/x/node_modules/x nm/x && " +
                "ln -s ../x/bin.js nm/.bin/x && ln -s . nm/self && ln -s ./x nm/dot"
            ),
            outputs: ["nm/"]
          },
          climbs: { ...sh("mkdir -p gen/sub && ln -s ../../../outside gen/sub/up"), outputs: ["gen/"] },
          chains: { ...sh("mkdir -p chain/s && ln -s .. chain/s/d && ln -s d/../.. chain/s/y"), outputs: ["chain/"] }
        }
      })
      const r = yield* run(dirs, ["--keep-going"])
      assert.strictEqual(r.code, 1, r.stderr)
      assert.match(
        r.stderr,
        /^✗ climbs: output `gen\/sub\/up` is a symlink to `\.\.\/\.\.\/\.\.\/outside`, which leads out of the working directory \(it goes up 3 levels, from 2 below it\)/m
      )
      assert.match(r.stderr, /^✗ chains: output `chain\/s\/y` is a symlink to `d\/\.\.\/\.\.`, which leads out/m)
      assert.match(r.stderr, /^✓ ok /m)
      assert.strictEqual(fs.readlinkSync(path.join(dirs.ws, "nm/x")), "../.pnpm/x/node_modules/x")
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "gen")))
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "chain")))
      untouched(dirs)
    }))
})

describe("kiln.json paths through a committed symlink", () => {
  /** The workspace with `link` a symlink to the directory outside, committed as any file is, and an input. */
  const withLink = (link: string, process: Record<string, unknown>) =>
    Effect.gen(function*() {
      // Among the inputs too, so the sandbox holds the link, as in the attack.
      const dirs = yield* setup({ processes: { p: { inputs: ["a.txt", link], ...process } } }, { "a.txt": "a\n" })
      fs.symlinkSync(dirs.outside, path.join(dirs.ws, link))
      return dirs
    })

  const refused = (field: string, declared: string, through: string) =>
    new RegExp(
      `^kiln: kiln\\.json: processes\\.p\\.${field}: "${declared}" goes through \`${through}\`, a symlink \\(to \`.*outside\`\\) ` +
        "in the workspace: kiln runs and writes a process only inside its sandbox$"
    )

  it.scoped("a working directory through a symlink: exit 2 before the process runs", () =>
    Effect.gen(function*() {
      const dirs = yield* withLink("pkg", {
        ...sh("pwd -P > where.txt"),
        workingDirectory: "pkg",
        outputs: ["where.txt"]
      })
      failsWith(yield* run(dirs), 2, refused("workingDirectory", "pkg", "pkg"))
      untouched(dirs)
    }))

  it.scoped("a named cache through a symlink: exit 2, and no link is made outside the sandbox", () =>
    Effect.gen(function*() {
      const dirs = yield* withLink("d", { ...sh("true"), namedCaches: { c: "d/cache" } })
      failsWith(yield* run(dirs), 2, refused("namedCaches\\.c", "d/cache", "d"))
      untouched(dirs)
    }))

  it.scoped("an output whose parent is a symlink: exit 2", () =>
    Effect.gen(function*() {
      const dirs = yield* withLink("sub", { ...sh("mkdir -p sub && echo x > sub/x.txt"), outputs: ["sub/x.txt"] })
      failsWith(yield* run(dirs), 2, refused("outputs\\[0\\]", "sub/x.txt", "sub"))
      untouched(dirs)
    }))

  it.scoped("a working directory that a dep's output makes a symlink in the inputs: the process is refused", () =>
    Effect.gen(function*() {
      // `pkg -> real` is contained (a dep may make it), but a working directory through it is still refused.
      const dirs = yield* setup({
        processes: {
          a: { ...sh("mkdir real && echo r > real/r.txt && ln -s real pkg"), outputs: ["real/", "pkg"] },
          b: { ...sh("pwd -P > where.txt"), deps: ["a"], workingDirectory: "pkg", outputs: ["where.txt"] }
        }
      })
      failsWith(
        yield* run(dirs),
        1,
        /^✗ b: kiln\.json: processes\.b\.workingDirectory: "pkg" goes through `pkg`, a symlink \(to `real`\) in the process's inputs: kiln runs and writes a process only inside its sandbox$/
      )
      assert.isFalse(fs.existsSync(path.join(dirs.ws, "real", "where.txt")))
      // Once a has written the link back, the workspace holds it: refused before anything runs.
      const again = yield* run(dirs)
      assert.strictEqual(again.code, 2, again.stderr)
      assert.match(
        again.stderr,
        /processes\.b\.workingDirectory: "pkg" goes through `pkg`, a symlink \(to `real`\) in the workspace/
      )
    }))
})

describe("inputs through a committed symlink", () => {
  it.scoped("an input path or glob below a symlink: exit 2 before anything runs, nothing beyond it read", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({
        processes: {
          literal: { ...sh("cat link/precious.txt > got.txt"), inputs: ["link/precious.txt"], outputs: ["got.txt"] },
          glob: { ...sh("cat link/x/* > got2.txt"), inputs: ["link/x/**"], outputs: ["got2.txt"] }
        }
      })
      fs.mkdirSync(path.join(dirs.outside, "x"))
      fs.writeFileSync(path.join(dirs.outside, "x", "secret.txt"), "secret\n")
      fs.symlinkSync(dirs.outside, path.join(dirs.ws, "link"))
      const r = yield* run(dirs)
      failsWith(
        r,
        2,
        /^kiln: kiln\.json: processes\.(glob|literal)\.inputs\[0\]: "link\/(x\/\*\*|precious\.txt)" goes through `link`, a symlink \(to `.*outside`\) in the workspace: kiln reads inputs only inside the workspace \(an input may name the link itself\)$/
      )
      assert.deepStrictEqual(fs.readdirSync(dirs.ws).sort(), ["kiln.json", "link"])
      // Below the engine's check, the snapshot refuses it too (`kiln ls`, `explain`, `store snapshot` walk as it does).
      const listed = yield* runCli(["ls"], {
        cwd: dirs.ws,
        env: { ...process.env, HOME: dirs.root, KILN_STORE_DIR: path.join(dirs.root, "store") }
      })
      assert.include(listed.stdout + listed.stderr, "it is below link, a symlink, which kiln does not follow")
      assert.notInclude(listed.stdout + listed.stderr, "secret")
      const store = path.join(dirs.root, "store")
      if (fs.existsSync(store)) {
        const grep = fs.readdirSync(store, { recursive: true, encoding: "utf8" }).filter((f) => f.includes("secret"))
        assert.deepStrictEqual(grep, [])
      }
    }))

  it.scoped("a link named as an input is taken as the link it is", () =>
    Effect.gen(function*() {
      const dirs = yield* setup({
        processes: { p: { ...sh("readlink link > got.txt"), inputs: ["link"], outputs: ["got.txt"] } }
      })
      fs.symlinkSync(dirs.outside, path.join(dirs.ws, "link"))
      const r = yield* run(dirs)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(fs.readFileSync(path.join(dirs.ws, "got.txt"), "utf8"), `${dirs.outside}\n`)
      untouched(dirs)
    }))
})
