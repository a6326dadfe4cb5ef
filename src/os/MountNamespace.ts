/**
 * Read-only bind mounts in a mount namespace of the process's own: how a shared tree reaches a sandbox in O(1). The
 * process sees the tree at its own path (not through a symlink, whose real path would leak the store's location into
 * what tools print and key on), cannot write into it (EROFS, root included), and the mounts vanish with the process:
 * nothing is left mounted when it dies, however it dies.
 *
 * Nothing here needs a compiler or a setuid helper: `unshare` and `mount` are util-linux's, on every Linux. As root,
 * `unshare --mount` is enough. Another user needs a user namespace to mount in (most distributions allow them), and a
 * second one inside it, so that the process runs as the user it is rather than as root: the mounts, made by the outer
 * one, are locked for the inner one.
 *
 * Plain Node, no Effect.
 */
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/**
 * A bind mount: `source` (a directory) shown read-only at `target` (an existing directory).
 */
export interface Mount {
  readonly source: string
  readonly target: string
}

/**
 * How this process can make mounts for its children: as root, or through user namespaces; `undefined` when neither
 * works here (then shared trees are written into each sandbox, as other trees are).
 */
export type Mode = "root" | "user"

const UNSHARE = ["/usr/bin/unshare", "/bin/unshare"]
const MOUNT = ["/usr/bin/mount", "/bin/mount"]
const SH = "/bin/sh"

const firstExisting = (candidates: ReadonlyArray<string>) => candidates.find((c) => fs.existsSync(c))

/**
 * The script the wrapper runs: `$1` mounts, then their `source target` pairs, then `PWD=` or `PWD=value` (dash sets
 * `PWD` in the environment it hands on; the process must see exactly its declared variables), then the command. A
 * mount that fails ends it with 125 before the command starts. The last line execs the command, or the inner
 * `unshare` that drops back to the user.
 */
const script = (mount: string) =>
  [
    `n=$1; shift`,
    `while [ "$n" -gt 0 ]; do ${mount} --bind -o ro -- "$1" "$2" || exit 125; shift 2; n=$((n - 1)); done`,
    `case "$1" in PWD=) unset PWD ;; *) export PWD="\${1#PWD=}" ;; esac; shift`,
    `exec "$@"`
  ].join("\n")

/**
 * `argv` run with `mounts` in a mount namespace of its own, for `mode`. The pid stays the same through every exec, so
 * the process's group and signals are as if it were spawned directly. `env` is the process's environment, of which
 * only `PWD` is looked at.
 */
export const wrap = (
  mode: Mode,
  mounts: ReadonlyArray<Mount>,
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>
): Array<string> => {
  const tools = toolsOrThrow()
  const pwd = env.PWD === undefined ? "PWD=" : `PWD=${env.PWD}`
  const pairs = mounts.flatMap((m) => [m.source, m.target])
  const namespace = mode === "root"
    ? [tools.unshare, "--mount", "--propagation", "private"]
    : [tools.unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"]
  const back = mode === "root"
    ? []
    : [tools.unshare, "--user", `--map-user=${process.getuid!()}`, `--map-group=${process.getgid!()}`]
  return [
    ...namespace,
    SH,
    "-c",
    script(tools.mount),
    "kiln-mounts",
    String(mounts.length),
    ...pairs,
    pwd,
    ...back,
    ...argv
  ]
}

interface Tools {
  readonly unshare: string
  readonly mount: string
}

let tools: Tools | undefined | null

const toolsOrThrow = (): Tools => {
  if (tools === undefined) {
    const unshare = firstExisting(UNSHARE)
    const mount = firstExisting(MOUNT)
    tools = unshare === undefined || mount === undefined || !fs.existsSync(SH) ? null : { unshare, mount }
  }
  if (tools === null) throw new Error("unshare, mount or /bin/sh is missing")
  return tools
}

let probed: { readonly mode: Mode | undefined; readonly why: string } | undefined

/**
 * Whether mounts work here, tried once per process with a real mount of a scratch directory (a kernel or a security
 * module may refuse what the user id allows): the mode that works, or `undefined` and why not.
 */
export const probe = (): { readonly mode: Mode | undefined; readonly why: string } => {
  if (probed !== undefined) return probed
  probed = probeOnce()
  return probed
}

const probeOnce = (): { readonly mode: Mode | undefined; readonly why: string } => {
  if (process.platform !== "linux") return { mode: undefined, why: "mount namespaces are Linux's" }
  try {
    toolsOrThrow()
  } catch (e) {
    return { mode: undefined, why: (e as Error).message }
  }
  const mode: Mode = process.getuid!() === 0 ? "root" : "user"
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mount-probe-"))
  try {
    const source = path.join(scratch, "source")
    const target = path.join(scratch, "target")
    fs.mkdirSync(source)
    fs.mkdirSync(target)
    fs.writeFileSync(path.join(source, "marker"), "")
    const argv = wrap(mode, [{ source, target }], [
      SH,
      "-c",
      `test -e "$0/marker" && ! touch "$0/new" 2>/dev/null`,
      target
    ], {})
    const r = childProcess.spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", env: {}, timeout: 10_000 })
    if (r.status === 0) return { mode, why: "" }
    const said = `${r.stderr ?? ""}`.trim().split("\n")[0] ?? ""
    return { mode: undefined, why: said !== "" ? said : `the probe exited with ${r.status ?? r.signal}` }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}
