// Compiles the `kiln` command's native client (src/programs/kiln/native/client.c): the package's bin, which hands a
// `kiln run` to a waiting standby engine without starting Node, else runs `node dist/cli.cjs`. Built as the native
// spawner is (spawnerNative.mjs): `$CC` or `cc`, statically where the C library allows it.
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { compileTo } from "./compileC.mjs"

const source = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src/programs/kiln/native/client.c")

/** Writes the program to `outfile`; undefined once built, or why it could not be. */
export const buildNativeClient = (outfile) => {
  // Stripped: it is the package's largest file after the bundle, and nothing debugs it by its symbols.
  const flags = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-s"]
  return compileTo(outfile, [[...flags, "-static", source], [...flags, source]])
}
