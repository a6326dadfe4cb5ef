/**
 * The real workspaces of `npm run bench:monorepo`, each pinned to a commit, and how one is made ready: its tree taken
 * from a git snapshot (`git archive`), a few documented changes so that it runs offline here, and an install at its
 * lock file — cached, so that only the first run on a machine installs.
 *
 * Where the snapshots come from: `--mirrors=DIR` (default `$KILN_BENCH_MIRRORS`, else /work/.mirror), a directory
 * holding `<owner>+<name>/repo`, a bare git directory of the repository (any clone with the commit works:
 * `git clone --bare https://github.com/<owner>/<name> DIR/<owner>+<name>/repo`). The cache:
 * `--cache=DIR` (default `$TMPDIR/kiln-bench-monorepo-cache`), `<key>-<commit>/` per workspace, complete once renamed
 * into place; the package managers' stores beside them.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { argValue, progress, rm } from "../report.js"
import type { Scope } from "./workspace.js"

export interface Repo {
  /** `--only` takes it. */
  readonly key: string
  readonly github: string
  readonly commit: string
  readonly manager: "pnpm" | "npm"
  /** pnpm's version, from the root package.json's `packageManager` at the commit. */
  readonly pnpm?: string
  /** The Turborepo the repository pins (react-email), or today's when it has none. */
  readonly turbo: string
  /** The package directories whose tasks run (globs), and those among them left out (why: {@link Repo.why}). */
  readonly scope: Scope
  readonly buildOutputs: ReadonlyArray<string>
  /**
   * Root files the tests read beyond kiln's default root inputs (package.json, lock file, tsconfig*.json…): kiln.json's
   * `rootInputs` of its `test` task, as a user writes it.
   */
  readonly testRootInputs: ReadonlyArray<string>
  /** A source file of a package nothing depends on: its build and test alone re-run. */
  readonly leafFile: string
  /** A file every task, or the most tasks, depend on. */
  readonly rootFile: string
  /** Why this repository, and what the benchmark changes in its copy. */
  readonly why: string
  /**
   * The changes, applied to the tree before the install and again to each tool's copy of it (so that an installed
   * tree cached before a change gets it too): each must be idempotent.
   */
  readonly patch: (dir: string) => void
}

const editJson = (file: string, f: (x: Record<string, unknown>) => void) => {
  const x = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>
  f(x)
  fs.writeFileSync(file, `${JSON.stringify(x, null, 2)}\n`)
}

/** Inserts `line` after `anchor` in `file`, once: a second call finds it there and leaves the file as it is. */
const insertOnce = (file: string, anchor: string, line: string) => {
  const text = fs.readFileSync(file, "utf8")
  if (text.includes(line)) return
  if (!text.includes(anchor)) throw new Error(`${file}: no ${JSON.stringify(anchor)} to insert after`)
  fs.writeFileSync(file, text.replace(anchor, `${anchor}${line}`))
}

export const REPOS: ReadonlyArray<Repo> = [
  {
    key: "react-email",
    github: "resend/react-email",
    // 2024-05-24: the last months of one package per component (later commits merged them into a few).
    commit: "14f570377697c46002f3491b323cfc6a531e6f49",
    manager: "pnpm",
    pnpm: "8.14.1",
    turbo: "1.11.3",
    scope: { include: ["packages/*"], exclude: ["packages/react-email", "packages/create-email"] },
    buildOutputs: ["dist/"],
    // vitest's `globals: true` and happy-dom, which every package's tests take from the root.
    testRootInputs: ["vitest.config.ts", "vitest.workspace.ts"],
    // A leaf component: only @react-email/components (a bundle of them all) depends on it.
    leafFile: "packages/text/src/index.ts",
    rootFile: "packages/render/src/index.ts",
    why:
      "pnpm 8 workspace with its own Turborepo 1.11 (turbo.json `pipeline`); 20 packages of its `packages/` in scope (not its Next.js apps), each built by " +
      "tsup (esm + cjs + `--dts`; tailwind by `tsc && vite build`), 17 of them tested by vitest 0.34 (happy-dom); " +
      "`@react-email/render` is a dependency of 19 of them, and `@react-email/components` depends on all. Left out: " +
      "`packages/react-email` (the preview CLI: its build bundles a Next.js app and its export test builds one) and " +
      "`packages/create-email` (no scripts). Changed in the copy: turbo.json's `test` gets `dependsOn: [\"^build\"]` " +
      "(as the repository's later turbo.json has: tests import their dependencies' `dist`, so without it a cold run " +
      "races), `packages/render/src/render-async-node.spec.tsx` is removed (it fetches https://example.com), and " +
      "tailwind's `vite.config.ts` gets `build.commonjsOptions.strictRequires: true` (vite 5.0's commonjs plugin, at " +
      "its default `auto`, decides which CommonJS modules of the bundled polyfills to wrap in a race between its " +
      "async transforms, rollup/plugins#1425: the same `vite build` gives different bytes from run to run on a loaded " +
      "box, in either tool, and the comparison of the outputs would flag it).",
    patch: (dir) => {
      editJson(path.join(dir, "turbo.json"), (t) => {
        ;(t.pipeline as Record<string, unknown>).test = { dependsOn: ["^build"] }
      })
      rm(path.join(dir, "packages/render/src/render-async-node.spec.tsx"))
      insertOnce(
        path.join(dir, "packages/tailwind/vite.config.ts"),
        "\n  build: {\n",
        "    commonjsOptions: { strictRequires: true },\n"
      )
    }
  },
  {
    key: "mcp-servers",
    github: "modelcontextprotocol/servers",
    commit: "76d64c822f5125032f89eb71dbdb94e42b434821",
    manager: "npm",
    turbo: "2.11.11",
    scope: { exclude: [] },
    buildOutputs: ["dist/"],
    testRootInputs: [],
    leafFile: "src/memory/index.ts",
    rootFile: "tsconfig.json",
    why: "npm workspaces (package-lock.json), no task runner of its own (`npm run build --workspaces`): 4 TypeScript " +
      "packages built by `tsc` (+ shx), 3 of them tested by vitest 3 with v8 coverage; independent of each other, " +
      "all extending the root tsconfig.json (the root edit). Changed in the copy: a turbo.json (`build` with outputs " +
      "`dist/**`, `test`, both `dependsOn: [\"^build\"]`, `globalDependencies: [\"tsconfig.json\"]`) and a " +
      "`packageManager` field for Turborepo 2, and server-filesystem's `test` script removed (11 of its tests fail " +
      "here, run as root in a container: they expect an unreadable directory).",
    patch: (dir) => {
      editJson(path.join(dir, "package.json"), (p) => {
        p.packageManager = `npm@${execFileSync("npm", ["--version"], { encoding: "utf8" }).trim()}`
      })
      fs.writeFileSync(
        path.join(dir, "turbo.json"),
        `${
          JSON.stringify(
            {
              $schema: "https://turbo.build/schema.json",
              globalDependencies: ["tsconfig.json"],
              tasks: { build: { dependsOn: ["^build"], outputs: ["dist/**"] }, test: { dependsOn: ["^build"] } }
            },
            null,
            2
          )
        }\n`
      )
      editJson(path.join(dir, "src/filesystem/package.json"), (p) => {
        delete (p.scripts as Record<string, string>).test
      })
    }
  }
]

export const cacheRoot = argValue("cache") ?? path.join(os.tmpdir(), "kiln-bench-monorepo-cache")
const mirrors = argValue("mirrors") ?? process.env.KILN_BENCH_MIRRORS ?? "/work/.mirror"

export interface Prepared {
  /** The installed tree, to copy for each tool (never run in). */
  readonly tree: string
  readonly reused: boolean
  readonly installSeconds: number
}

const install = (r: Repo, dir: string) => {
  const run = (cmd: string, args: ReadonlyArray<string>) => {
    progress(`${r.key}: ${cmd} ${args.join(" ")}`)
    execFileSync(cmd, args, { cwd: dir, stdio: ["ignore", "ignore", "inherit"] })
  }
  // No install scripts: what they would do here is fetch from elsewhere (sharp, puppeteer) or build the package
  // (mcp's `prepare`); esbuild's binary is its platform package, which its launcher finds without them.
  if (r.manager === "pnpm") {
    run("npx", [
      "--yes",
      `pnpm@${r.pnpm}`,
      "install",
      "--frozen-lockfile",
      "--ignore-scripts",
      "--store-dir",
      path.join(cacheRoot, "pnpm-store"),
      // The packages in scope and the root's, not the Next.js apps nothing here builds.
      ...["--filter", "./packages/*", "--filter", "."]
    ])
  } else run("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
}

/** The repository's tree at its commit, patched and installed at its lock file: from the cache, else made now. */
export const prepare = (r: Repo): Prepared => {
  const entry = path.join(cacheRoot, `${r.key}-${r.commit.slice(0, 12)}`)
  if (fs.existsSync(entry)) return { tree: entry, reused: true, installSeconds: 0 }
  const gitDir = path.join(mirrors, r.github.replace("/", "+"), "repo")
  if (!fs.existsSync(gitDir)) {
    throw new Error(
      `${r.key}: no git snapshot of ${r.github} at ${gitDir} (--mirrors=DIR, or clone it there with --bare)`
    )
  }
  const staging = `${entry}.tmp-${process.pid}`
  rm(staging)
  fs.mkdirSync(staging, { recursive: true })
  const t0 = Date.now()
  progress(`${r.key}: git archive ${r.commit} of ${gitDir} into ${staging}`)
  execFileSync("sh", ["-c", `git --git-dir="$0" archive "$1" | tar -x -C "$2"`, gitDir, r.commit, staging], {
    stdio: ["ignore", "ignore", "inherit"]
  })
  r.patch(staging)
  install(r, staging)
  fs.renameSync(staging, entry)
  return { tree: entry, reused: false, installSeconds: (Date.now() - t0) / 1000 }
}
