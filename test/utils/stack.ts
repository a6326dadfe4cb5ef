import { Layer } from "effect"
import * as path from "node:path"
import * as ProcessRunner from "../../src/layers/runner/ProcessRunner.js"
import * as Sandboxes from "../../src/layers/sandbox/Sandboxes.js"
import * as Sandboxer from "../../src/layers/sandboxer/Sandboxer.js"
import * as Store from "../../src/layers/store/Store.js"
import * as Workspace from "../../src/layers/workspace/Workspace.js"

export const cli = path.resolve("dist/cli.js")

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
