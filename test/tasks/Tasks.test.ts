/**
 * kiln.json's tasks written out over real workspace files (issue #36): npm, yarn, bun and pnpm layouts, `^build`
 * through transitive workspace dependencies, per-package tasks and explicit processes beside them, and each error a
 * user can make, as one line naming the file and the field. The expansion is pure once the workspace is read; the
 * processes it gives are checked as kiln.json's own are (`TaskExpansion.expand`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { decode } from "../../src/domain/config/Config.js"
import type { Config } from "../../src/domain/config/Config.js"
import { globMatcher } from "../../src/layers/tasks/internal/packageGlobs.js"
import { readPackages } from "../../src/layers/tasks/internal/pnpmWorkspaceYaml.js"
import { satisfies } from "../../src/layers/tasks/internal/semver.js"
import * as TaskExpansion from "../../src/layers/tasks/TaskExpansion.js"
import * as Tasks from "../../src/layers/tasks/Tasks.js"
import { lines } from "../../src/programs/kiln/commands/lsCommand.js"
import { tempDir, writeTree } from "../utils/temp.js"

const TWO_TASKS = { tasks: { build: { outputs: ["dist/"] }, test: { deps: ["build", "^build"] } } }

const pkg = (name: string, fields: Record<string, unknown> = {}) =>
  JSON.stringify({ name, version: "1.0.0", ...fields })

/** A workspace of `files` in a temp directory, its kiln.json `config`, expanded and checked. */
const expanded = (files: Parameters<typeof writeTree>[1], config: unknown = TWO_TASKS) =>
  Effect.gen(function*() {
    const ws = yield* tempDir("kiln-tasks-")
    writeTree(ws, files)
    const decoded = yield* Either.match(decode("kiln.json", JSON.stringify(config)), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })
    return { ws, ...(yield* TaskExpansion.expand(ws, "kiln.json", decoded)) }
  })

/** The error line an expansion fails with. */
const failure = (files: Parameters<typeof writeTree>[1], config: unknown = TWO_TASKS) =>
  Effect.flatMap(Effect.either(expanded(files, config)), (r) =>
    // An expansion that succeeds is reported by its process names: vitest formatting the whole expansion as a
    // failure's value took longer than any test may.
    Either.isLeft(r)
      ? Effect.succeed(r.left.message)
      : Effect.dieMessage(`expected an error, got processes ${Object.keys(r.right.config.processes).join(", ")}`))

const PATH_END = "/usr/local/bin:/usr/bin:/bin"
const pathOf = (dir: string) =>
  [`{chroot}/${dir}/node_modules/.bin`, "{chroot}/packages/node_modules/.bin", "{chroot}/node_modules/.bin"].join(":") +
  (["/usr/local/bin", "/usr/bin", "/bin"].includes(path.dirname(process.execPath))
    ? ""
    : `:${path.dirname(process.execPath)}`) +
  `:${PATH_END}`

/** lib (build) ← app (build, test), app depending on lib as `spec`. */
const libAndApp = (spec: string) => ({
  "packages/lib/package.json": pkg("lib", { main: "dist/index.js", scripts: { build: "tsc -p ." } }),
  "packages/lib/src/index.ts": "export const x = 1\n",
  "packages/app/package.json": pkg("app", {
    dependencies: { lib: spec },
    scripts: { build: "tsc -p .", test: "node --test", lint: "eslint ." }
  }),
  "packages/app/src/main.ts": "import { x } from 'lib'\n",
  "tsconfig.base.json": "{}",
  "eslint.config.mjs": "export default []\n"
})

describe("tasks", () => {
  it.scoped("npm workspaces: build:<pkg> and test:<pkg> from two tasks, ^build the dependency's build", () =>
    Effect.gen(function*() {
      const { config, origins } = yield* expanded({
        "package.json": JSON.stringify({ name: "root", private: true, workspaces: ["packages/*"] }),
        "package-lock.json": "{}",
        "node_modules/lib": { link: "../packages/lib" },
        ...libAndApp("^1.0.0")
      })
      assert.deepStrictEqual(Object.keys(config.processes), ["build:app", "build:lib", "test:app"])
      assert.isUndefined(config.tasks)
      assert.deepStrictEqual(origins["test:app"], {
        key: "test",
        task: "test",
        package: "app",
        directory: "packages/app"
      })
      assert.deepStrictEqual(config.processes["test:app"], {
        argv: ["/bin/sh", "-c", "node --test"],
        inputs: [
          "packages/app/**",
          "package-lock.json",
          "package.json",
          "tsconfig.base.json",
          "node_modules/**",
          // lib's build brings its outputs: of lib itself, only what resolving it reads.
          "packages/lib/package.json",
          "!packages/app/dist/**"
        ],
        deps: ["build:app", "build:lib"],
        env: { PATH: pathOf("packages/app") },
        workingDirectory: "packages/app"
      })
      // build:app does not depend on lib's build: it gets lib's files (but its outputs), as lib's consumers read them.
      assert.deepStrictEqual(config.processes["build:app"]!.inputs, [
        "packages/app/**",
        "package-lock.json",
        "package.json",
        "tsconfig.base.json",
        "node_modules/**",
        "packages/lib/**",
        "!packages/app/dist/**",
        "!packages/lib/dist/**"
      ])
      assert.deepStrictEqual(config.processes["build:lib"]!.outputs, ["dist/"])
      assert.isUndefined(config.processes["build:lib"]!.deps)
      // lib has no test script: no test:lib, as turbo has none.
      assert.isFalse("test:lib" in config.processes)
    }))

  it.scoped("yarn's workspaces.packages, with an exclusion and `*` for the workspace's version", () =>
    Effect.gen(function*() {
      const { config } = yield* expanded({
        "package.json": JSON.stringify({ private: true, workspaces: { packages: ["packages/*", "!packages/old"] } }),
        "yarn.lock": "",
        "packages/old/package.json": pkg("old", { scripts: { build: "true" } }),
        ...libAndApp("*")
      })
      assert.deepStrictEqual(Object.keys(config.processes), ["build:app", "build:lib", "test:app"])
      assert.deepStrictEqual(config.processes["test:app"]!.deps, ["build:app", "build:lib"])
      assert.include(config.processes["test:app"]!.inputs!, "yarn.lock")
    }))

  it.scoped("bun: workspace:* under a ** glob, bun.lock, and a version range the workspace does not satisfy", () =>
    Effect.gen(function*() {
      const { config } = yield* expanded({
        "package.json": JSON.stringify({ private: true, workspaces: ["packages/**"] }),
        "bun.lock": "{}",
        ...libAndApp("workspace:*"),
        "packages/nested/deep/package.json": pkg("deep", {
          dependencies: { lib: "^2.0.0" },
          scripts: { test: "bun test" }
        })
      })
      assert.deepStrictEqual(config.processes["test:app"]!.deps, ["build:app", "build:lib"])
      assert.include(config.processes["test:app"]!.inputs!, "bun.lock")
      // lib@1.0.0 does not satisfy ^2.0.0: the registry's lib, not the workspace's.
      assert.isUndefined(config.processes["test:deep"]!.deps)
      assert.deepStrictEqual(config.processes["test:deep"]!.workingDirectory, "packages/nested/deep")
    }))

  it.scoped("pnpm: pnpm-workspace.yaml's packages, ^build through a transitive dependency, each node_modules", () =>
    Effect.gen(function*() {
      const { config } = yield* expanded({
        "package.json": JSON.stringify({ name: "root", private: true }),
        "pnpm-workspace.yaml": [
          "# the packages",
          "packages:",
          "  - 'packages/*' # all of them",
          "  - \"tools/cli\"",
          "  - '!packages/private'",
          "catalog:",
          "  is-odd: ^3.0.1",
          "onlyBuiltDependencies: [esbuild]",
          ""
        ].join("\n"),
        "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
        "node_modules/.pnpm/is-odd@3.0.1/node_modules/is-odd/index.js": "",
        "packages/core/package.json": pkg("core", { scripts: { build: "node build.mjs" } }),
        "packages/core/node_modules/is-odd": { link: "../../../node_modules/.pnpm/is-odd@3.0.1/node_modules/is-odd" },
        "packages/lib/package.json": pkg("lib", { dependencies: { core: "workspace:^" }, scripts: {} }),
        "packages/lib/node_modules/core": { link: "../../core" },
        "packages/lib/index.js": "module.exports = require('core')\n",
        "packages/private/package.json": pkg("private", { scripts: { build: "exit 1" } }),
        "tools/cli/package.json": pkg("cli", {
          devDependencies: { lib: "workspace:*" },
          scripts: { build: "node build.mjs", test: "node test.mjs" }
        }),
        "tools/cli/node_modules/lib": { link: "../../../packages/lib" }
      })
      assert.deepStrictEqual(Object.keys(config.processes), ["build:core", "build:cli", "test:cli"])
      const test = config.processes["test:cli"]!
      // core through lib: its build, and the node_modules its dist/ resolves from.
      assert.deepStrictEqual(test.deps, ["build:cli", "build:core"])
      assert.deepStrictEqual(test.inputs, [
        "tools/cli/**",
        "package.json",
        "pnpm-lock.yaml",
        "pnpm-workspace.yaml",
        "node_modules/**",
        "packages/core/package.json",
        "packages/core/node_modules/**",
        // lib has no build: its files are what cli resolves.
        "packages/lib/**",
        "!tools/cli/dist/**"
      ])
      assert.strictEqual(
        test.env!.PATH!.split(":").slice(0, 3).join(":"),
        "{chroot}/tools/cli/node_modules/.bin:{chroot}/tools/node_modules/.bin:{chroot}/node_modules/.bin"
      )
    }))

  it.scoped("a package's own task, pkg#task deps, task options, and explicit processes beside the tasks", () =>
    Effect.gen(function*() {
      const { config, origins } = yield* expanded(
        {
          "package.json": JSON.stringify({ workspaces: ["packages/*"] }),
          ...libAndApp("workspace:*")
        },
        {
          processes: {
            deploy: { argv: ["true"], deps: ["build:app"] },
            gen: { argv: ["true"], outputs: ["gen.txt"] }
          },
          tasks: {
            build: { outputs: ["dist/"], deps: ["^build", "gen"], env: { NODE_ENV: "production" } },
            "app#build": { outputs: ["out/", "meta.json"], deps: ["lib#build"], timeout: "5m", cache: "never" },
            lint: {
              inputs: ["src/**", "!src/**/*.gen.ts"],
              optionalInputs: [".eslintrc.local.json", "!fixtures/big/**"],
              rootInputs: ["eslint.config.mjs"],
              writableInputs: ["node_modules/.cache"],
              namedCaches: { eslint: ".eslintcache" },
              hostPaths: ["/opt/toolchain"],
              network: true
            }
          }
        }
      )
      assert.deepStrictEqual(Object.keys(config.processes), ["deploy", "gen", "build:app", "build:lib", "lint:app"])
      assert.strictEqual(origins["build:app"]!.key, "app#build")
      const app = config.processes["build:app"]!
      assert.deepStrictEqual(app.deps, ["build:lib"])
      assert.deepStrictEqual([app.outputs, app.timeout, app.cache], [["out/", "meta.json"], "5m", "never"])
      assert.deepStrictEqual(config.processes["build:lib"]!.deps, ["gen"])
      assert.strictEqual(config.processes["build:lib"]!.env!.NODE_ENV, "production")
      const lint = config.processes["lint:app"]!
      assert.deepStrictEqual(lint.inputs, [
        "packages/app/src/**",
        "packages/app/package.json",
        "package.json",
        "tsconfig.base.json",
        "packages/lib/**",
        "eslint.config.mjs",
        "!packages/app/src/**/*.gen.ts",
        "!packages/lib/dist/**"
      ])
      // Relative to the package, as its inputs are: an exclusion stays one.
      assert.deepStrictEqual(lint.optionalInputs, [
        "packages/app/.eslintrc.local.json",
        "!packages/app/fixtures/big/**"
      ])
      assert.deepStrictEqual(lint.writableInputs, ["packages/app/node_modules/.cache"])
      assert.deepStrictEqual(lint.namedCaches, { eslint: "packages/app/.eslintcache" })
      // Host paths are the host's: absolute, not under the package.
      assert.deepStrictEqual([lint.hostPaths, lint.network], [["/opt/toolchain"], true])
      // What `kiln ls` prints: every process, where it runs, its deps.
      const listed = lines({ config, origins })
      assert.include(listed, "build:app  packages/app: tsc -p .  <- build:lib")
      assert.include(listed, "deploy     true  <- build:app")
    }))

  it.scoped("npm and yarn 1 run pre and post scripts around a script; pnpm, yarn 2+ and bun do not", () =>
    Effect.gen(function*() {
      const files = (root: Record<string, unknown>, lockfile: Record<string, string>) => ({
        "package.json": JSON.stringify({ workspaces: ["packages/*"], ...root }),
        ...lockfile,
        "packages/a/package.json": pkg("a", {
          scripts: {
            prebuild: "echo pre >> log # a comment",
            build: "echo build >> log",
            postbuild: "echo post >> log"
          }
        })
      })
      const scriptIn = (root: Record<string, unknown>, lockfile: Record<string, string>) =>
        Effect.map(expanded(files(root, lockfile)), ({ config, ws }) => ({
          script: config.processes["build:a"]!.argv[2]!,
          ws
        }))
      const npm = yield* scriptIn({}, { "package-lock.json": "{}" })
      // Run as the process would be: each in turn, the comment ending with its line.
      const ran = spawnSync("/bin/sh", ["-c", npm.script], { cwd: path.join(npm.ws, "packages/a"), encoding: "utf8" })
      assert.strictEqual(ran.status, 0, ran.stderr)
      assert.strictEqual(fs.readFileSync(path.join(npm.ws, "packages/a/log"), "utf8"), "pre\nbuild\npost\n")
      const yarn1 = yield* scriptIn({}, { "yarn.lock": "# THIS IS AN AUTOGENERATED FILE.\n# yarn lockfile v1\n" })
      assert.strictEqual(yarn1.script, npm.script)
      for (
        const [root, lockfile] of [
          [{}, { "pnpm-lock.yaml": "" }],
          [{}, { "yarn.lock": "__metadata:\n  version: 8\n" }],
          [{}, { "bun.lock": "{}" }],
          [{ packageManager: "yarn@4.5.0" }, { "package-lock.json": "{}" }]
        ] as const
      ) {
        assert.strictEqual((yield* scriptIn(root, lockfile)).script, "echo build >> log", JSON.stringify(lockfile))
      }
    }))

  it.scoped("what .gitignore files ignore at a package's top is not among its files; what a task names stays", () =>
    Effect.gen(function*() {
      const files = {
        "package.json": JSON.stringify({ name: "root", private: true, workspaces: ["packages/*"] }),
        "package-lock.json": "{}",
        ".gitignore": "node_modules/\ncoverage\n*.tsbuildinfo\n.env\n.turbo/\n",
        "packages/lib/.gitignore": "/scratch.txt\n",
        // Left by tools run by hand: a coverage report, tsc's and turbo's state, a scratch file.
        "packages/lib/coverage/lcov.info": "TN:\n",
        "packages/lib/tsconfig.tsbuildinfo": "{}",
        "packages/lib/.turbo/turbo-build.log": "",
        "packages/lib/scratch.txt": "",
        // Ignored, but read as tools build: kept.
        "packages/lib/.env": "API=1\n",
        "packages/lib/node_modules/dep/index.js": "",
        ...libAndApp("^1.0.0")
      }
      const { config } = yield* expanded(files)
      // lib's own build, and app's, which takes lib's files: both without what git ignores at lib's top.
      const leftOut = [
        "!packages/lib/.turbo/**",
        "!packages/lib/coverage/**",
        "!packages/lib/scratch.txt",
        "!packages/lib/tsconfig.tsbuildinfo"
      ]
      // Its node_modules, which git ignores too, stays among its files.
      assert.deepStrictEqual(config.processes["build:lib"]!.inputs, [
        "packages/lib/**",
        "package-lock.json",
        "package.json",
        "tsconfig.base.json",
        "!packages/lib/dist/**",
        ...leftOut
      ])
      assert.includeMembers([...config.processes["build:app"]!.inputs!], leftOut)
      assert.notInclude(config.processes["build:app"]!.inputs!, "!packages/lib/.env")

      // A path a task names (rootInputs, optionalInputs, writableInputs) stays in, though git ignores it.
      const { config: named } = yield* expanded(files, {
        tasks: {
          build: {
            outputs: ["dist/"],
            rootInputs: ["packages/lib/coverage/lcov.info"],
            optionalInputs: ["tsconfig.tsbuildinfo"],
            writableInputs: [".turbo"]
          }
        }
      })
      assert.deepStrictEqual(
        named.processes["build:lib"]!.inputs!.filter((g) => g.startsWith("!")),
        ["!packages/lib/dist/**", "!packages/lib/scratch.txt"]
      )

      // An ignored entry whose name a glob reads as more than itself (a file named `*`, which `[*]` ignores) stays in:
      // its exclusion, `!packages/lib/*`, would leave out every file at the package's top, package.json among them.
      const { config: odd } = yield* expanded({ ...files, ".gitignore": "[*]\ncoverage\n", "packages/lib/*": "" })
      assert.deepStrictEqual(
        odd.processes["build:lib"]!.inputs!.filter((g) => g.startsWith("!")),
        ["!packages/lib/dist/**", "!packages/lib/coverage/**", "!packages/lib/scratch.txt"]
      )
    }))

  it.scoped("without workspaces, the root package is the one package", () =>
    Effect.gen(function*() {
      const { config } = yield* expanded({
        "package.json": pkg("solo", { scripts: { build: "tsc", test: "vitest run" } }),
        "src/a.ts": ""
      })
      assert.deepStrictEqual(config.processes["test:solo"]!.inputs, ["**", "package.json", "!dist/**", "!.git/**"])
      assert.isUndefined(config.processes["test:solo"]!.workingDirectory)
      assert.deepStrictEqual(config.processes["test:solo"]!.deps, ["build:solo"])
    }))

  it.scoped("defaults reach a task's processes under their own; a task that passes PATH has kiln's", () =>
    Effect.gen(function*() {
      const { config } = yield* expanded({ "package.json": pkg("solo", { scripts: { build: "tsc", test: "t" } }) }, {
        defaults: { env: { PATH: "/default", CI: "1" }, inputs: ["shared.txt"], cache: "always" },
        tasks: { build: { passEnv: ["PATH=/fallback"] }, test: { env: { CI: "0" } } }
      })
      const build = config.processes["build:solo"]!
      assert.strictEqual(build.env!.PATH, process.env.PATH ?? "/fallback")
      assert.strictEqual(build.env!.CI, "1")
      assert.strictEqual(build.cache, "always")
      assert.deepStrictEqual(build.inputs!.slice(0, 1), ["shared.txt"])
      const test = config.processes["test:solo"]!
      assert.match(test.env!.PATH!, /node_modules\/\.bin/)
      assert.strictEqual(test.env!.CI, "0")
      assert.isUndefined(config.defaults)
    }))

  it.scoped("the run memo's text is the same from kiln.json's JSON (the no-op check) as from the decoded config", () =>
    Effect.gen(function*() {
      const config = { tasks: TWO_TASKS.tasks, $schema: "x.json", processes: { z: { argv: ["true"] } } }
      const { config: decoded, ws } = yield* expanded(
        { "package.json": JSON.stringify({ workspaces: ["packages/*"] }), ...libAndApp("*") },
        config
      )
      const raw = Tasks.expandAt(ws, "kiln.json", JSON.parse(JSON.stringify(config)) as Tasks.ConfigInput)
      assert.isFalse(Tasks.isProblem(raw))
      assert.strictEqual(Tasks.canonicalText((raw as Tasks.Expanded).config), Tasks.canonicalText(decoded as Config))
    }))

  describe("errors: one line naming the file and the field", () => {
    const npmWs = { "package.json": JSON.stringify({ workspaces: ["packages/*"] }), ...libAndApp("*") }
    const cases: ReadonlyArray<readonly [string, Parameters<typeof writeTree>[1], unknown, string]> = [
      [
        "an unknown dep task",
        npmWs,
        { tasks: { test: { deps: ["^bundle"] } } },
        "kiln.json: tasks.test.deps[0]: unknown task \"bundle\": tasks declares no such task"
      ],
      [
        "an unknown dep",
        npmWs,
        { tasks: { test: { deps: ["nope"] } } },
        "kiln.json: tasks.test.deps[0]: unknown task or process \"nope\""
      ],
      [
        "a package that does not exist",
        npmWs,
        { tasks: { test: { deps: ["web#build"] } } },
        "kiln.json: tasks.test.deps[0]: no workspace package is named \"web\""
      ],
      [
        "a task that depends on itself",
        npmWs,
        { tasks: { build: { deps: ["build"] } } },
        "kiln.json: tasks.build.deps[0]: a task cannot depend on itself (\"^build\" is build of the package's " +
        "dependencies)"
      ],
      [
        "a cycle between packages",
        {
          "package.json": JSON.stringify({ workspaces: ["packages/*"] }),
          "packages/a/package.json": pkg("a", { dependencies: { b: "*" }, scripts: { build: "x" } }),
          "packages/b/package.json": pkg("b", { dependencies: { a: "*" }, scripts: { build: "x" } })
        },
        { tasks: { build: { deps: ["^build"] } } },
        "kiln.json: tasks: dependency cycle: build:a -> build:b -> build:a"
      ],
      [
        "a task named as an explicit process",
        npmWs,
        { processes: { build: { argv: ["true"] } }, tasks: { build: {} } },
        "kiln.json: tasks.build: \"build\" is also a process in processes: a dep of that name would name either, " +
        "so rename one"
      ],
      [
        "a task refused for its name: what depends on it, by ^build or by a process's name, is not refused again",
        npmWs,
        {
          processes: { build: { argv: ["true"] }, deploy: { argv: ["true"], deps: ["build:app"] } },
          tasks: { build: {}, test: { deps: ["^build", "build"] } }
        },
        "kiln.json: tasks.build: \"build\" is also a process in processes: a dep of that name would name either, " +
        "so rename one"
      ],
      [
        "a process the tasks give declared explicitly",
        npmWs,
        { processes: { "build:lib": { argv: ["true"] } }, tasks: { build: {} } },
        "kiln.json: tasks.build: gives the process \"build:lib\", which processes declares too"
      ],
      [
        "an output glob",
        npmWs,
        { tasks: { build: { outputs: ["dist/**"] } } },
        "kiln.json: tasks.build.outputs[0]: \"dist/**\" is a glob: outputs are paths, and a directory ends with / " +
        "(\"dist/\")"
      ],
      [
        "an input outside the package",
        npmWs,
        { tasks: { build: { inputs: ["../x"] } } },
        "kiln.json: tasks.build.inputs[0]: \"../x\" must be relative and stay inside the package"
      ],
      [
        "an output outside the package (Config.check, reported at the task)",
        npmWs,
        { tasks: { build: { outputs: ["../dist/"] } } },
        "kiln.json: tasks.build.outputs[0]: \"../dist/\" must be a relative path inside the working directory"
      ],
      [
        "a task's passEnv variable unset, without a default (ResolvedConfig, reported at the task)",
        npmWs,
        { tasks: { build: { passEnv: ["KILN_TEST_SURELY_UNSET"] } } },
        "kiln.json: tasks.build.passEnv[0]: \"KILN_TEST_SURELY_UNSET\" is not set in kiln's environment: set it, or " +
        "give a default (\"KILN_TEST_SURELY_UNSET=value\")"
      ],
      [
        "a workspaces glob that matches nothing",
        { "package.json": JSON.stringify({ workspaces: ["packages/*", "apps/*"] }), ...libAndApp("*") },
        TWO_TASKS,
        "package.json: workspaces[1]: \"apps/*\" matches no package (no directory with a package.json)"
      ],
      [
        "a pnpm-workspace.yaml glob that matches nothing",
        { "package.json": "{}", "pnpm-workspace.yaml": "packages:\n  - apps/*\n", ...libAndApp("*") },
        TWO_TASKS,
        "pnpm-workspace.yaml: packages[0]: \"apps/*\" matches no package (no directory with a package.json)"
      ],
      [
        "a workspaces glob whose base is a symlink out of the workspace: not followed",
        {
          "package.json": JSON.stringify({ workspaces: ["packages/*", "linked/*"] }),
          ...libAndApp("*"),
          // Where the link leads is a package, as a directory outside the workspace could hold.
          "elsewhere/x/package.json": pkg("x", { scripts: { build: "echo x" } }),
          "linked": { link: "elsewhere" }
        },
        TWO_TASKS,
        "package.json: workspaces[1]: \"linked/*\" matches no package (no directory with a package.json)"
      ],
      [
        "a package.json that is a symlink out of the workspace: no package",
        {
          "package.json": JSON.stringify({ workspaces: ["packages/*", "apps/*"] }),
          ...libAndApp("*"),
          "elsewhere/y/package.json": pkg("y", { scripts: { build: "echo y" } }),
          "apps/y/package.json": { link: "../../elsewhere/y/package.json" }
        },
        TWO_TASKS,
        "package.json: workspaces[1]: \"apps/*\" matches no package (no directory with a package.json)"
      ],
      [
        "a bad pnpm-workspace.yaml",
        { "package.json": "{}", "pnpm-workspace.yaml": "packages:\n  a: b\n", ...libAndApp("*") },
        TWO_TASKS,
        "pnpm-workspace.yaml: line 2: expected an item `- glob` of `packages`"
      ],
      [
        "a package without a name",
        { "package.json": JSON.stringify({ workspaces: ["packages/*"] }), "packages/x/package.json": "{}" },
        TWO_TASKS,
        "packages/x/package.json: name: a workspace package needs a name: its processes are named after it"
      ],
      [
        "no package.json",
        {},
        TWO_TASKS,
        "package.json: cannot read: ENOENT: tasks are the scripts of the workspace's packages"
      ]
    ]
    for (const [what, files, config, message] of cases) {
      it.scoped(what, () => Effect.map(failure(files, config), (m) => assert.strictEqual(m, message)))
    }

    it.scoped(
      "every problem of the tasks, the defaults and the processes at once, each once; a refused task's " +
        "processes known to what depends on them",
      () =>
        Effect.map(
          failure(npmWs, {
            defaults: { optionalInputs: ["../d"] },
            tasks: {
              build: { deps: ["^bundle", "web#build"], optionalInputs: ["/abs"] },
              test: { deps: ["build", "nope"] },
              "web#build": {}
            },
            processes: { deploy: { argv: ["true"], deps: ["build:app", "gen"] } }
          }),
          (m) =>
            assert.deepStrictEqual(m.split("\n"), [
              "kiln.json: tasks[\"web#build\"]: no workspace package is named \"web\"",
              "kiln.json: tasks.build.deps[0]: unknown task \"bundle\": tasks declares no such task",
              "kiln.json: tasks.build.deps[1]: no workspace package is named \"web\"",
              "kiln.json: tasks.build.optionalInputs[0]: \"/abs\" must be relative and stay inside the package",
              "kiln.json: tasks.test.deps[1]: unknown task or process \"nope\"",
              "kiln.json: defaults.optionalInputs[0]: invalid glob \"../d\": globs are relative to the workspace and " +
              "stay inside it",
              "kiln.json: processes.deploy.deps[1]: unknown process \"gen\""
            ])
        )
    )
  })

  it("pnpm-workspace.yaml: block and flow lists, quotes, comments; what is not a list of globs is refused", () => {
    assert.deepStrictEqual(readPackages("packages:\n- a/*\n- 'b' # c\n"), ["a/*", "b"])
    assert.deepStrictEqual(readPackages("---\nx: 1\npackages: [ 'a/*', \"b\\\"c\", d/**, ]\n"), ["a/*", "b\"c", "d/**"])
    assert.deepStrictEqual(readPackages("packages: [a,\n  b]\n"), ["a", "b"])
    assert.deepStrictEqual(readPackages("packages:\n  - '!it''s'\n  - !x/y\n"), ["!it's", "!x/y"])
    assert.isUndefined(readPackages("catalog:\n  a: 1\n"))
    assert.deepStrictEqual(readPackages("packages: a"), { line: 1, detail: "`packages` must be a list of globs" })
    assert.deepStrictEqual(readPackages("packages:\n\t- a\n"), {
      line: 2,
      detail: "a tab indents it: YAML indents with spaces"
    })
    assert.deepStrictEqual(readPackages("packages:\n  - 'a\n"), {
      line: 2,
      detail: "unterminated or malformed single-quoted string 'a"
    })
    assert.deepStrictEqual(readPackages("packages:\n  - *anchor\n"), {
      line: 2,
      detail: "\"*anchor\" is not a package glob"
    })
    assert.deepStrictEqual(readPackages("packages: [a\n"), {
      line: 1,
      detail: "`packages: [` is never closed with `]`"
    })
    assert.deepStrictEqual(readPackages("packages:\n  - a\npackages:\n  - b\n"), {
      line: 3,
      detail: "`packages` appears twice"
    })
  })

  it("workspace globs and ranges", () => {
    const m = (glob: string, dir: string) => globMatcher(glob)(dir)
    assert.isTrue(m("packages/*", "packages/a"))
    assert.isFalse(m("packages/*", "packages/a/b"))
    assert.isTrue(m("./packages/**/", "packages/a/b"))
    assert.isTrue(m("packages/**", "packages"))
    assert.isTrue(m("**/x", "a/b/x"))
    assert.isTrue(m("{apps,libs}/*", "libs/q"))
    assert.isTrue(m("p-[ab]", "p-b"))
    assert.isFalse(m("p-[!ab]", "p-b"))
    for (
      const [v, r, ok] of [
        ["1.2.3", "^1.0.0", true],
        ["2.0.0", "^1.0.0", false],
        ["0.2.3", "^0.2.0", true],
        ["0.3.0", "^0.2.0", false],
        ["1.2.3", "~1.2.0", true],
        ["1.3.0", "~1.2.0", false],
        ["1.2.3", "1.x", true],
        ["1.2.3", ">=1.2.3 <2", true],
        ["1.2.3", "1.0.0 - 1.2.2", false],
        ["1.2.3", "<1 || >=1.2", true],
        ["1.2.3-beta.1", "^1.2.0", false],
        ["1.2.3-beta.2", "^1.2.3-beta.1", true],
        ["1.2.3", "latest", false]
      ] as const
    ) {
      assert.strictEqual(satisfies(v, r), ok, `${v} ${r}`)
    }
  })
})
