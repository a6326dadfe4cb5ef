/**
 * kiln as npm ships it, for test/package/: `npm pack` of this checkout (its dist/, built by `npm test` first) and
 * installs of it into temp directories, the ways users install it.
 *
 * The installs take what they can from npm's cache (`--prefer-offline`: every tarball, after the checkout's `npm ci`);
 * only package metadata npm has not cached yet (the first time on a machine) comes from the registry.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export const checkout = path.resolve(".")

/**
 * The environment without what `npm test` and the developer's shell set for npm and kiln; and no standby engine,
 * which a developer's session (its `XDG_RUNTIME_DIR`) would otherwise leave behind from the installed kiln's runs.
 */
export const cleanEnv = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|KILN_)/i.test(k))),
  KILN_STANDBY: "off"
})

/** Runs a command to its end without blocking the test worker (an install takes a minute; vitest's RPC must not wait). */
export const sh = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = cleanEnv()) =>
  Effect.async<{ code: number | null; stdout: string; stderr: string; both: string }>((resume) => {
    const child = execFile(
      command,
      args,
      { cwd, env, encoding: "utf8", maxBuffer: 64 << 20 },
      (error, stdout, stderr) =>
        resume(Effect.succeed({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          stdout,
          stderr,
          both: `${stdout}\n${stderr}`
        }))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

export const npm = (args: ReadonlyArray<string>, cwd: string, env?: NodeJS.ProcessEnv) =>
  sh("npm", [...args, "--prefer-offline", "--no-audit", "--no-fund"], cwd, env)

/** The tarball `npm pack` makes of this checkout, in `dir`. */
export const pack = (dir: string) =>
  Effect.gen(function*() {
    const r = yield* sh("npm", ["pack", "--pack-destination", dir], checkout)
    assert.strictEqual(r.code, 0, r.both)
    const tarball = path.join(dir, r.stdout.trim().split("\n").at(-1)!)
    assert.isTrue(fs.existsSync(tarball), tarball)
    return tarball
  })

/** A fresh project in `dir`: an ES module package with nothing installed. */
export const consumerProject = (dir: string) => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
  return dir
}

/** The tsconfig of a consumer that typechecks `files`: strict, NodeNext, against Node's types from this checkout. */
export const consumerTsconfig = (dir: string, files: ReadonlyArray<string>, options: Record<string, unknown> = {}) =>
  fs.writeFileSync(
    path.join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        module: "NodeNext",
        moduleResolution: "NodeNext",
        target: "ES2022",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        // kiln's types use Node's (Buffer, NodeJS.ProcessEnv), as any Node library's do.
        typeRoots: [path.join(checkout, "node_modules/@types")],
        types: ["node"],
        ...options
      },
      files
    })
  )

/** `tsc -p dir`, with this checkout's TypeScript. */
export const tsc = (dir: string) =>
  sh(process.execPath, [path.join(checkout, "node_modules/typescript/bin/tsc"), "-p", "."], dir)

/** Every installed package under `dir`'s node_modules, nested ones included: name → the versions found. */
export const installedPackages = (dir: string): Map<string, Array<string>> => {
  const found = new Map<string, Array<string>>()
  const visit = (modules: string) => {
    if (!fs.existsSync(modules)) return
    for (const e of fs.readdirSync(modules, { withFileTypes: true })) {
      if (!e.isDirectory() || e.name.startsWith(".")) continue
      const dirs = e.name.startsWith("@")
        ? fs.readdirSync(path.join(modules, e.name)).map((n) => path.join(modules, e.name, n))
        : [path.join(modules, e.name)]
      for (const d of dirs) {
        const manifest = path.join(d, "package.json")
        if (!fs.existsSync(manifest)) continue
        const { name, version } = JSON.parse(fs.readFileSync(manifest, "utf8")) as { name: string; version: string }
        found.set(name, [...(found.get(name) ?? []), version])
        visit(path.join(d, "node_modules"))
      }
    }
  }
  visit(path.join(dir, "node_modules"))
  return found
}
