/**
 * A workspace's own files are as hostile as kiln.json (a red-team session, issue #36's tasks): a glob or `.gitignore`
 * pattern whose regular expression could not be made (`[z-a]`) or would backtrack without end (`*a*a*a*a*a*a*a*[b]`
 * against a long name), a `pnpm-workspace.yaml` whose reader took quadratic time, a workspace file that is a symlink
 * out of the workspace, a FIFO or far too large, a task named like a member of `Object.prototype`, and two tasks that
 * give one process name. Each is a one-line error naming the file (or, for a `.gitignore`, a pattern left unread),
 * never a crash, a hang, unbounded memory or a read outside the workspace.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { decode } from "../../src/domain/config/Config.js"
import { globMatcher } from "../../src/layers/tasks/internal/packageGlobs.js"
import { readPackages } from "../../src/layers/tasks/internal/pnpmWorkspaceYaml.js"
import * as TaskExpansion from "../../src/layers/tasks/TaskExpansion.js"
import { tempDir, writeTree } from "../utils/temp.js"

const pkg = (name: string, fields: Record<string, unknown> = {}) =>
  JSON.stringify({ name, version: "1.0.0", ...fields })

/** The expansion of `config` over the workspace `prepare` makes in a temp directory: its process names, or its error. */
const expandIn = (prepare: (ws: string) => void, config: unknown) =>
  Effect.gen(function*() {
    const ws = yield* tempDir("kiln-hostile-ws-")
    prepare(ws)
    const decoded = yield* Either.match(decode("kiln.json", JSON.stringify(config)), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })
    const r = yield* Effect.either(TaskExpansion.expand(ws, "kiln.json", decoded))
    return Either.isLeft(r) ? { error: r.left.message } : { names: Object.keys(r.right.config.processes).sort() }
  })

const npmWorkspace = (ws: string, packages: Record<string, Record<string, unknown>>) =>
  writeTree(ws, {
    "package.json": JSON.stringify({ name: "root", workspaces: ["packages/*"] }),
    ...Object.fromEntries(
      Object.entries(packages).map(([name, fields]) => [`packages/${name}/package.json`, pkg(name, fields)])
    )
  })

describe("hostile workspace files", () => {
  it("globs are matched in linear time, and a class the wrong way round matches nothing", () => {
    // As regular expressions: a SyntaxError thrown (`Range out of order`), and exponential time on a long name.
    assert.isFalse(globMatcher("packages/[z-a]")("packages/q"))
    assert.isFalse(globMatcher("*a*a*a*a*a*a*a*a*a*a*a*[b]")("a".repeat(200)))
    assert.isTrue(globMatcher("*a*a*a*a*a*a*a*a*a*a*a*[b]")(`${"a".repeat(200)}b`))
    assert.isTrue(globMatcher("packages/**/**/a")("packages/a"))
    assert.isTrue(globMatcher("**/**/a")("x/y/a"))
    assert.isTrue(globMatcher("packages/{a,b}*/[!x]?")("packages/bz/yq"))
    assert.isFalse(globMatcher("packages/{a,b}*/[!x]?")("packages/bz/xq"))
    // Braces that would give more alternatives than a real glob has match nothing, and the workspace's glob is refused.
    assert.isFalse(globMatcher(`${"{a,b}".repeat(7)}`)("aaaaaaa"))
  })

  it.scoped("a node_modules that links out of the workspace is declared as it is, whatever it points at", () =>
    Effect.gen(function*() {
      const outside = yield* tempDir("kiln-hostile-outside-")
      const ws = yield* tempDir("kiln-hostile-ws-")
      npmWorkspace(ws, { a: { scripts: { build: "true" } } })
      fs.symlinkSync(outside, path.join(ws, "node_modules"))
      const decoded = yield* Either.match(decode("kiln.json", JSON.stringify({ tasks: { build: {} } })), {
        onLeft: Effect.fail,
        onRight: Effect.succeed
      })
      const inputsOf = () =>
        Effect.map(TaskExpansion.expand(ws, "kiln.json", decoded), (r) => r.config.processes["build:a"]!.inputs)
      // Whether the directory outside is empty must not change what the workspace declares (it would say so).
      const empty = yield* inputsOf()
      fs.writeFileSync(path.join(outside, "secret"), "x")
      assert.deepStrictEqual(yield* inputsOf(), empty)
      assert.include(empty ?? [], "node_modules/**")
    }))

  it.scoped("a .gitignore pattern no regular expression could be made of is left unread, not a crash", () =>
    Effect.map(
      expandIn((ws) => {
        npmWorkspace(ws, { a: { scripts: { build: "true" } } })
        writeTree(ws, { ".gitignore": "*.[z-a]\n*a*a*a*a*a*a*a*[b]\n", [`packages/a/${"a".repeat(100)}`]: "x" })
      }, { tasks: { build: {} } }),
      (r) => assert.deepStrictEqual(r, { names: ["build:a"] })
    ))

  it.scoped("a root package.json that is a symlink out of the workspace is not followed", () =>
    Effect.gen(function*() {
      const outside = yield* tempDir("kiln-hostile-outside-")
      fs.writeFileSync(path.join(outside, "package.json"), pkg("outside", { scripts: { build: "echo outside" } }))
      const r = yield* expandIn(
        (ws) => fs.symlinkSync(path.join(outside, "package.json"), path.join(ws, "package.json")),
        {
          tasks: { build: {} }
        }
      )
      assert.deepStrictEqual(r, {
        error:
          "package.json: is a symlink, which kiln does not follow: tasks are the scripts of the workspace's packages"
      })
    }))

  it.scoped("workspace files that are FIFOs, links to devices, or far too large are refused at once", () =>
    Effect.gen(function*() {
      /** One package `a` with a build task, then `plant` done to the workspace. */
      const planted = (plant: (ws: string) => void) =>
        expandIn((ws) => {
          npmWorkspace(ws, { a: { scripts: { build: "true" } } })
          plant(ws)
        }, { tasks: { build: {} } })
      const fifo = yield* planted((ws) => spawnSync("mkfifo", [path.join(ws, "pnpm-workspace.yaml")]))
      assert.deepStrictEqual(fifo, { error: "pnpm-workspace.yaml: is not a regular file" })
      const zero = yield* planted((ws) => fs.symlinkSync("/dev/zero", path.join(ws, "pnpm-workspace.yaml")))
      assert.deepStrictEqual(zero, { error: "pnpm-workspace.yaml: is a symlink, which kiln does not follow" })
      // Sparse: nothing on disk, 5 MiB to a reader.
      const large = yield* planted((ws) => fs.truncateSync(path.join(ws, "packages/a/package.json"), 5 * 1024 * 1024))
      assert.deepStrictEqual(large, { error: "packages/a/package.json: is larger than 4194304 bytes (5242880)" })
      const yarnLockLink = yield* planted((ws) => fs.symlinkSync("/dev/zero", path.join(ws, "yarn.lock")))
      assert.deepStrictEqual(yarnLockLink, { names: ["build:a"] })
    }))

  it("pnpm-workspace.yaml's reader takes linear time: a long line is refused, an unclosed list found once", () => {
    // A regular expression took ~8 s on an 80 KB line without a colon, growing as its square.
    assert.deepStrictEqual(readPackages(`a${" ".repeat(500_000)}b\n`), {
      line: 1,
      detail: "is longer than 4096 characters"
    })
    assert.deepStrictEqual(readPackages(`packages: [\n${"\n".repeat(200_000)}`), {
      line: 1,
      detail: "`packages: [` is never closed with `]`"
    })
    assert.deepStrictEqual(readPackages("a b: 1\n\"packages\" : [x]\n"), ["x"])
    assert.deepStrictEqual(readPackages("a:b\n"), {
      line: 1,
      detail: "expected a top-level `key:` (pnpm-workspace.yaml is a mapping)"
    })
  })

  it.scoped("a task named like a member of Object.prototype is a script a package has or has not", () =>
    Effect.gen(function*() {
      for (const task of ["constructor", "toString", "hasOwnProperty"]) {
        const none = yield* expandIn((ws) => npmWorkspace(ws, { a: { scripts: { build: "true" } } }), {
          tasks: { [task]: {} }
        })
        assert.deepStrictEqual(none, { names: [] }, task)
        const own = yield* expandIn((ws) => npmWorkspace(ws, { a: { scripts: { [task]: "true" } } }), {
          tasks: { [task]: {} }
        })
        assert.deepStrictEqual(own, { names: [`${task}:a`] }, task)
      }
    }))

  it.scoped("a package in a directory a glob would read as more than its name is refused, naming it", () =>
    Effect.gen(function*() {
      for (const dir of ["[a]", "!x", "a{b,c}"]) {
        const r = yield* expandIn((ws) => npmWorkspace(ws, { [dir]: { scripts: { build: "true" } } }), {
          tasks: { build: {} }
        })
        assert.deepStrictEqual(r, {
          error: `packages/${dir}/package.json: its directory's name holds a character a glob reads as more than ` +
            `itself (${JSON.stringify(`packages/${dir}`)}): a package's files are its directory's glob, so rename ` +
            "the directory"
        })
      }
    }))

  it.scoped("a task's named cache outside its package is refused, not rebased below it", () =>
    Effect.map(
      expandIn((ws) => npmWorkspace(ws, { a: { scripts: { build: "true" } } }), {
        tasks: { build: { namedCaches: { tool: "/abs/cache" } } }
      }),
      (r) =>
        assert.deepStrictEqual(r, {
          error: "kiln.json: tasks.build.namedCaches.tool: \"/abs/cache\" must be relative and stay inside the package"
        })
    ))

  it.scoped("a package name that cannot name processes is refused at its package.json, escaped", () =>
    Effect.gen(function*() {
      const cases = [
        [
          "a\u0000b",
          "\"a\\u0000b\" names processes, and it holds the control character U+0000, which would reach " +
          "the terminal as it is"
        ],
        [
          "evil\u202egnp.exe",
          "\"evil\\u202egnp.exe\" names processes, and it holds the bidirectional control U+202E, " +
          "which makes a terminal show it in another order"
        ]
      ] as const
      for (const [name, detail] of cases) {
        const r = yield* expandIn((ws) =>
          writeTree(ws, {
            "package.json": JSON.stringify({ name: "root", workspaces: ["packages/*"] }),
            "packages/a/package.json": pkg(name, { scripts: { build: "true" } })
          }), { tasks: { build: {} } })
        assert.deepStrictEqual(r, { error: `packages/a/package.json: name: ${detail}` })
      }
    }))

  it.scoped("two tasks that give one process name are refused, naming both", () =>
    Effect.map(
      expandIn(
        (ws) => npmWorkspace(ws, { "a:b": { scripts: { x: "echo ab" } }, b: { scripts: { "x:a": "echo b" } } }),
        {
          tasks: { x: {}, "x:a": {} }
        }
      ),
      (r) =>
        assert.deepStrictEqual(r, {
          error:
            "kiln.json: tasks[\"x:a\"]: gives the process \"x:a:b\" (package b), which task \"x\" of package a:b " +
            "gives too: rename a script or a package"
        })
    ))
})
