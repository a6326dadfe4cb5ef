// Run by `npm install` (postinstall), after patch-lmdb.mjs: keeps the package's bin (`dist/kiln`, the native client
// built with the package: src/programs/kiln/native/client.c) only if it runs on this machine. A package built on
// another architecture or C library gets the shell script the build writes without a C compiler, which runs Node
// every time. In a checkout before its first build there is nothing to check.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../dist/kiln")
if (fs.existsSync(bin)) {
  // `--version` goes to Node either way: what is asked here is whether the program starts at all.
  const probe = spawnSync(bin, ["--version"], { stdio: "ignore", env: { ...process.env, KILN_STANDBY: "off" } })
  if (probe.error !== undefined) {
    fs.writeFileSync(bin, "#!/bin/sh\nexec node \"$(dirname \"$(readlink -f \"$0\")\")/cli.cjs\" \"$@\"\n", {
      mode: 0o755
    })
    process.stderr.write(`kiln: dist/kiln cannot run here (${probe.error.message}): it runs Node every time\n`)
  }
}
