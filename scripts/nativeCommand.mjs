// Run by `npm install` (postinstall), after patch-lmdb.mjs: keeps the package's bin (`dist/kiln`, the native client
// built with the package: src/programs/kiln/native/client.c) only if it runs on this machine. A package built on
// another architecture or C library gets the shell script the build writes without a C compiler, which runs Node
// every time. In a checkout before its first build there is nothing to check.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** `dist/kiln` where no native one can run: `node` with the `cli.cjs` beside the script's real path. */
export const shellFallback = "#!/bin/sh\nexec node \"$(dirname \"$(readlink -f \"$0\")\")/cli.cjs\" \"$@\"\n"

const here = fileURLToPath(import.meta.url)
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === here) {
  const bin = path.resolve(path.dirname(here), "../dist/kiln")
  if (fs.existsSync(bin)) {
    // `--version` goes to Node either way: what is asked here is whether the program starts at all. A binary of
    // another machine is not always an error: the kernel refuses it (ENOEXEC) and the spawn runs it as a shell script,
    // which fails.
    const probe = spawnSync(bin, ["--version"], { stdio: "ignore", env: { ...process.env, KILN_STANDBY: "off" } })
    if (probe.error !== undefined || probe.status !== 0) {
      fs.writeFileSync(bin, shellFallback, { mode: 0o755 })
      const why = probe.error?.message ?? `it exited with ${probe.status ?? probe.signal}`
      process.stderr.write(`kiln: dist/kiln cannot run here (${why}): it runs Node every time\n`)
    }
  }
}
