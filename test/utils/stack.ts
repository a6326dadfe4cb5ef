import { Layer } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import * as Sandboxes from "../../src/layers/sandbox/Sandboxes.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import * as Store from "../../src/layers/store/Store.js"
import * as Workspace from "../../src/layers/workspace/Workspace.js"

export const cli = path.resolve("dist/cli.js")

/**
 * The environment a test runs the built CLI in: this process's, with the store, sandbox root (made here) and named
 * caches under `root`, so that nothing the run keeps is outside the test's temp dir.
 */
export const cliEnvIn = (root: string) => {
  fs.mkdirSync(path.join(root, "sandboxes"), { recursive: true })
  return {
    ...process.env,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named")
  }
}

/**
 * Runs the built CLI in `ws` with nothing of this process's environment but PATH and HOME, its store, sandboxes,
 * named caches and workspace locks under `root`: each run with its own `--summary` file, read back.
 */
export const summarizedCli = <Summary>(root: string, ws: string) => {
  fs.mkdirSync(path.join(root, "sandboxes"), { recursive: true })
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KILN_STORE_DIR: path.join(root, "store"),
    KILN_SANDBOX_ROOT: path.join(root, "sandboxes"),
    KILN_NAMED_CACHES_DIR: path.join(root, "named"),
    KILN_LOCK_DIR: path.join(root, "locks")
  }
  let runs = 0
  return (args: ReadonlyArray<string>) => {
    const summaryFile = path.join(root, `summary-${++runs}.json`)
    const r = spawnSync(process.execPath, [cli, ...args, "--progress", "plain", "--summary", summaryFile], {
      cwd: ws,
      encoding: "utf8",
      env
    })
    const summary = fs.existsSync(summaryFile) ? JSON.parse(fs.readFileSync(summaryFile, "utf8")) as Summary : undefined
    return { code: r.status, stderr: r.stderr, summary }
  }
}

export interface StackOptions {
  readonly root: string
  readonly inProcess?: boolean
  readonly keep?: "never" | "on-failure" | "always"
  readonly runner?: ProcessRunner.Options
}

/** The whole execution stack (what `Engine.layer` needs) on a store, sandbox root and named-caches dir under `root`. */
export const stack = (o: StackOptions) =>
  Layer.merge(
    ProcessRunner.layer({ namedCachesDir: path.join(o.root, "named_caches"), grace: "1 second", ...o.runner }),
    Workspace.layer
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        o.inProcess === true
          ? Sandboxer.layerInProcess
          : Sandboxer.layer({ command: [process.execPath, cli], socketDir: path.join(o.root, "sock") }),
        Sandboxes.layer({ root: path.join(o.root, "sandboxes"), keep: o.keep ?? "never", sweepOnStart: false })
      )
    ),
    Layer.provideMerge(Store.layer({ root: path.join(o.root, "store") }))
  )
