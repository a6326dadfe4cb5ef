// kiln as a library: kiln's stack as the CLI composes it (`Kiln.layer`: the Store, the Sandboxer, Sandboxes, the
// ProcessRunner and the Engine, with the helpers' lifetime beneath them) in a small Effect program that runs two
// processes and prints their results. Run it with `node examples/library/main.mjs` after `npm run build` (it imports
// the package by name, so it also works as `import ... from "kiln"` in another project).
import { Effect } from "effect"
import { Digest, Kiln, Process, ProcessRunner, Store } from "kiln"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-library-"))

const KilnLive = Kiln.layer({
  store: { root: path.join(root, "store") },
  sandboxes: { root: path.join(root, "sandboxes") },
  runner: { namedCachesDir: path.join(root, "named_caches") }
})

const program = Effect.gen(function*() {
  const store = yield* Store.Store
  const runner = yield* ProcessRunner.ProcessRunner
  const sh = (script) =>
    new Process.Process({ argv: ["/bin/sh", "-c", script], env: { PATH: "/usr/bin:/bin" }, inputDigest: Digest.empty })
  const [a, b] = yield* Effect.all([runner.run(sh("echo one")), runner.run(sh("echo two; exit 3"))], {
    concurrency: 2
  })
  for (const r of [a, b]) {
    const stdout = Buffer.from(yield* store.getFile(r.stdoutDigest)).toString().trim()
    console.log(`${stdout}: exit ${r.exitCode}, ${r.source}, action ${Digest.format(r.actionDigest)}`)
  }
})

await Effect.runPromise(program.pipe(
  Effect.provide(KilnLive),
  Effect.ensuring(Effect.sync(() => {
    fs.rmSync(root, { recursive: true, force: true })
  }))
))
