/**
 * Read-only bind mounts in a mount namespace of the process's own: how a shared tree reaches a sandbox in O(1). The
 * process sees the tree at its own path (not through a symlink, whose real path would leak the store's location into
 * what tools print and key on), cannot write into it (EROFS, root included), and the mounts vanish with the process:
 * nothing is left mounted when it dies, however it dies.
 *
 * The native spawner makes the same namespace itself between fork and exec (`programs/spawner/native/ns.c`, from
 * {@link toWire}); what follows is how the Node spawner and a kept sandbox's `__run.sh` make it ({@link wrap}).
 *
 * Nothing here needs a compiler or a setuid helper: `unshare` and `mount` are util-linux's, on every Linux. As root,
 * `unshare --mount` is enough. Another user needs a user namespace to mount in (most distributions allow them), and a
 * second one inside it, so that the process runs as the user it is rather than as root: the mounts, made by the outer
 * one, are locked for the inner one.
 *
 * The same namespace pins where the process runs: its sandbox is bound (with the mounts made inside it) over
 * {@link EXEC_ROOT}, the one path every process of every run on every machine sees its sandbox at, and it starts in
 * its working directory there. A tool that writes its own path into what it makes (a source map's absolute paths, a
 * Go binary built without `-trimpath`, a Jest snapshot) then writes the same bytes wherever the sandbox really is.
 *
 * `KILN_MOUNT_NAMESPACES=0` turns all of it off (then `probe` says so): shared trees are written, and processes run
 * at their sandbox's own path.
 *
 * Plain Node, no Effect.
 */
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as AtomicFile from "../AtomicFile.js"
import { bootIdText } from "../BootId.js"
import * as ViewScript from "./ViewScript.js"

/**
 * A mount at `target` (an existing directory or file), by its kind:
 *
 * - `ro` (the default): `source` bound read-only.
 * - `overlay`: an overlay file system, `source` its options (see {@link overlayOptions}). Writable until `seal`ed.
 * - `rw`: `source` bound read-write: a path inside an overlay bound over itself stays writable once it is sealed.
 * - `seal`: the mount at `target` made read-only (`source` unused), the mounts made under it before staying as they
 *   are.
 */
export interface Mount {
  readonly kind?: MountKind
  readonly source: string
  readonly target: string
}

/** See {@link Mount}. */
export type MountKind = "ro" | "overlay" | "rw" | "seal"

const KINDS: ReadonlyArray<MountKind> = ["ro", "overlay", "rw", "seal"]

/**
 * The options of an overlay whose lower layer is `lower` and whose writes go to `upper` (with `work` its work
 * directory, on the same file system). A comma cannot be said in them (mount(8) splits options at commas); `:` and
 * `\` are escaped as the overlay file system reads them.
 */
export const overlayOptions = (lower: string, upper: string, work: string): string => {
  const escape = (p: string) => {
    if (p.includes(",")) throw new Error(`an overlay cannot name \`${p}\`: it holds a comma`)
    return p.replace(/[\\:]/g, (c) => `\\${c}`)
  }
  return `lowerdir=${escape(lower)},upperdir=${escape(upper)},workdir=${escape(work)}`
}

const triple = (m: Mount) => [m.kind ?? "ro", m.source, m.target]

/**
 * Whether mounts made in `mode` can be overlays: as root always; in a user namespace from Linux 5.11 on.
 */
export const overlaysIn = (mode: Mode, release: string = os.release()): boolean => {
  if (mode === "root") return true
  const [major = 0, minor = 0] = release.split(/[.-]/).map((n) => Number(n))
  return major > 5 || (major === 5 && minor >= 11)
}

const overlaysProbed = new Map<string, { readonly works: boolean; readonly why: string }>()

/**
 * Whether a tree can be laid over with writable paths here (see {@link Mount}): an overlay whose writes go to `dir`'s
 * file system (where sandboxes are, or will be), a writable path bound inside it, the rest sealed read-only. Tried once per
 * process and directory, with a real namespace (a kernel, a security module or the file system may refuse).
 */
export const overlaysWork = (mode: Mode, dir: string): { readonly works: boolean; readonly why: string } => {
  const key = `${mode}\0${dir}`
  let probed = overlaysProbed.get(key)
  if (probed === undefined) {
    probed = overlaysIn(mode) ? probeOverlay(mode, dir) : { works: false, why: `Linux ${os.release()} is before 5.11` }
    overlaysProbed.set(key, probed)
  }
  return probed
}

const probeOverlay = (mode: Mode, dir: string) => {
  let scratch: string | undefined
  try {
    // A directory not made yet (the sandbox root, before the first sandbox) is on its parent's file system.
    let at = dir
    while (!fs.existsSync(at) && path.dirname(at) !== at) at = path.dirname(at)
    scratch = fs.mkdtempSync(path.join(at, ".kiln-overlay-probe-"))
    const lower = path.join(scratch, "lower")
    const target = path.join(scratch, "target")
    const upper = path.join(target, "layer", "upper")
    const work = path.join(target, "layer", "work")
    for (const d of [path.join(lower, "ro"), path.join(upper, "rw"), work]) fs.mkdirSync(d, { recursive: true })
    const rw = path.join(target, "rw")
    const r = ran(wrap(
      mode,
      [
        { kind: "overlay", source: overlayOptions(lower, upper, work), target },
        { kind: "rw", source: rw, target: rw },
        { kind: "seal", source: "", target }
      ],
      [SH, "-c", `: > "$0/rw/new" && ! ( : > "$0/ro/new" ) 2>/dev/null`, target],
      {}
    ))
    return r === undefined ? { works: true, why: "" } : { works: false, why: r.why }
  } catch (e) {
    return { works: false, why: (e as Error).message }
  } finally {
    if (scratch !== undefined) fs.rmSync(scratch, { recursive: true, force: true })
  }
}

/**
 * How this process can make mounts for its children: as root, or through user namespaces; `undefined` when neither
 * works here (then shared trees are written into each sandbox, as other trees are).
 */
export type Mode = "root" | "user"

/**
 * Where a process sees its sandbox, when this machine can show it there (see {@link execRoot}). `/mnt` because a
 * directory must already be there to bind over, kiln makes none outside its own directories, and `/mnt` is on every
 * Linux (the filesystem hierarchy standard has it, for mounting something temporarily: this). Its own contents are
 * hidden from the process, which has no business with them. `/tmp` is on every Linux too, but a tool's temporary
 * files would then land among its inputs.
 */
export const EXEC_ROOT = "/mnt"

/** Set to `0`, nothing is mounted: shared trees are written into each sandbox, and processes run where it is. */
export const KNOB = "KILN_MOUNT_NAMESPACES"

const UNSHARE = ["/usr/bin/unshare", "/bin/unshare"]
const MOUNT = ["/usr/bin/mount", "/bin/mount"]
const SH = "/bin/sh"

const firstExisting = (candidates: ReadonlyArray<string>) => candidates.find((c) => fs.existsSync(c))

/**
 * The script the wrapper runs: `$1` mounts, then their `kind source target` triples (see {@link Mount}), then the sandbox to bind over
 * `EXEC_ROOT` and the directory to start in there (both empty: neither), then `PWD=` or `PWD=value` (dash sets `PWD`
 * in the environment it hands on; the process must see exactly its declared variables), then the command. A mount
 * (or `cd`) that fails ends it with 125 before the command starts. The sandbox is bound last, recursively, so that
 * the mounts made inside it come along. The last line execs the command, or the inner `unshare` that drops back to
 * the user.
 */
const mountLoop = (mount: string) => [
  `n=$1; shift`,
  `while [ "$n" -gt 0 ]; do case "$1" in`,
  `  ro) ${mount} --bind -o ro -- "$2" "$3" ;;`,
  `  overlay) ${mount} -t overlay -o "$2" -- overlay "$3" ;;`,
  `  rw) ${mount} --bind -- "$2" "$3" ;;`,
  `  seal) ${mount} -o remount,bind,ro -- "$3" ;;`,
  `  *) false ;;`,
  `esac || exit 125; shift 3; n=$((n - 1)); done`
]

const pwdLine = `case "$1" in PWD=) unset PWD ;; *) export PWD="\${1#PWD=}" ;; esac; shift`

const script = (mount: string) =>
  [
    ...mountLoop(mount),
    `if [ -n "$1" ]; then ${mount} --rbind -- "$1" ${EXEC_ROOT} && cd -- "$2" || exit 125; fi; shift 2`,
    pwdLine,
    `exec "$@"`
  ].join("\n")

/**
 * The script of a strict view (see `ViewScript`): the mounts, the new root, then the process run as the child of the
 * shell, which is PID 1 of its namespace and must outlive it (its exit ends every process left there).
 */
const viewScript = (mount: string, lines: ReadonlyArray<string>) =>
  [...mountLoop(mount), ...lines, pwdLine, `"$@" &`, `wait $!`].join("\n")

/**
 * Where the process runs: its sandbox (a host path), shown at `root` (default `EXEC_ROOT`), and its working directory
 * there (under `root`). Only a strict view shows a sandbox at its own path (`root` the sandbox): a process that is not
 * pinned still sees its sandbox, in its new root.
 */
export interface Pinned {
  readonly sandbox: string
  readonly cwd: string
  readonly root?: string | undefined
}

/**
 * The strict view: the process sees a root of its own that holds only the system's directories (read-only), its
 * sandbox (at its root), a private `/tmp`, a minimal `/dev`, its own `/proc`, and `hostPaths` (read-only, each at its
 * own path); it is its init's child in PID and IPC namespaces of its own, and in a network namespace with only a
 * loopback unless `network`. See `programs/spawner/native/root.c` for the list and why each is there.
 */
export interface View {
  readonly hostPaths: ReadonlyArray<string>
  readonly network: boolean
  /** Host paths shown read-write at their own paths: the process's named caches, which its sandbox links to. */
  readonly writablePaths?: ReadonlyArray<string> | undefined
}

/**
 * A mount namespace of a process's own: how it is made, what is mounted in it, where the process runs, and the strict
 * view when it has one (then `pinned` is required: the view's root shows the sandbox there).
 */
export interface Namespace {
  readonly mode: Mode
  readonly mounts: ReadonlyArray<Mount>
  readonly pinned?: Pinned | undefined
  readonly view?: View | undefined
}

/**
 * `namespace` as a spawn request carries it to the spawner, which makes it itself (the native one, with the system
 * calls: `native/ns.c`) or through {@link wrap} (the Node one): `[mode, sandbox, root, cwd, kind, source, target,
 * …]`, the sandbox, root and cwd empty where it is not pinned. A view is more kinds of triple: `view` (source `net`
 * with the host's network), one `host` per host path and one `hostrw` per writable one (source and target the path).
 */
export const toWire = (namespace: Namespace): Array<string> => {
  const { pinned, view } = namespace
  return [
    namespace.mode,
    pinned?.sandbox ?? "",
    pinned === undefined ? "" : pinned.root ?? EXEC_ROOT,
    pinned?.cwd ?? "",
    ...namespace.mounts.flatMap(triple),
    ...(view === undefined ? [] : ["view", view.network ? "net" : "", ""]),
    ...(view?.hostPaths ?? []).flatMap((p) => ["host", p, p]),
    ...(view?.writablePaths ?? []).flatMap((p) => ["hostrw", p, p])
  ]
}

/** The namespace {@link toWire} wrote. */
export const fromWire = (wire: ReadonlyArray<string>): Namespace => {
  const [mode, sandbox, root, cwd, ...triples] = wire
  const mounts: Array<Mount> = []
  const hostPaths: Array<string> = []
  const writablePaths: Array<string> = []
  let network: boolean | undefined
  for (let i = 0; i + 2 < triples.length; i += 3) {
    if (triples[i] === "view") network = triples[i + 1] === "net"
    else if (triples[i] === "host") hostPaths.push(triples[i + 2]!)
    else if (triples[i] === "hostrw") writablePaths.push(triples[i + 2]!)
    else {mounts.push({
        kind: KINDS.find((k) => k === triples[i]) ?? "ro",
        source: triples[i + 1]!,
        target: triples[i + 2]!
      })}
  }
  return {
    mode: mode === "root" ? "root" : "user",
    mounts,
    pinned: sandbox === undefined || sandbox === "" ?
      undefined :
      { sandbox, cwd: cwd ?? "", ...(root !== undefined && root !== EXEC_ROOT ? { root } : {}) },
    ...(network !== undefined ? { view: { hostPaths, network, writablePaths } } : {})
  }
}

/**
 * `argv` run with `mounts` in a mount namespace of its own, for `mode`, and with its sandbox at `EXEC_ROOT` when
 * `pinned`. The pid stays the same through every exec, so the process's group and signals are as if it were spawned
 * directly. `env` is the process's environment, of which only `PWD` is looked at.
 */
export const wrap = (
  mode: Mode,
  mounts: ReadonlyArray<Mount>,
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>,
  pinned?: Pinned,
  view?: View
): Array<string> => {
  const tools = toolsOrThrow()
  const pwd = env.PWD === undefined ? "PWD=" : `PWD=${env.PWD}`
  const triples = mounts.flatMap(triple)
  const user = mode === "root" ? [] : ["--user", "--map-root-user"]
  const back = mode === "root"
    ? []
    : [tools.unshare, "--user", `--map-user=${process.getuid!()}`, `--map-group=${process.getgid!()}`]
  // A mount namespace of its own, whose mounts never propagate back to the host's.
  const privateMounts = [tools.unshare, ...user, "--mount", "--propagation", "private"]
  if (view !== undefined) {
    const viewing = ViewScript.viewTools()
    if (viewing === undefined || pinned === undefined) {
      throw new Error(
        pinned === undefined ? "a view needs its sandbox" : "mount, umount, pivot_root, mkdir or ln is missing"
      )
    }
    const lines = ViewScript.viewLines(viewing, {
      sandbox: pinned.sandbox,
      root: pinned.root ?? EXEC_ROOT,
      cwd: pinned.cwd,
      hostPaths: view.hostPaths,
      writablePaths: view.writablePaths ?? [],
      network: view.network
    })
    return [
      ...privateMounts,
      "--pid",
      "--fork",
      "--kill-child",
      "--ipc",
      ...(view.network ? [] : ["--net"]),
      SH,
      "-c",
      viewScript(tools.mount, lines),
      "kiln-view",
      String(mounts.length),
      ...triples,
      pwd,
      ...back,
      ...argv
    ]
  }
  return [
    ...privateMounts,
    SH,
    "-c",
    script(tools.mount),
    "kiln-mounts",
    String(mounts.length),
    ...triples,
    pinned?.sandbox ?? "",
    pinned?.cwd ?? "",
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

interface Probed {
  readonly mode: Mode | undefined
  readonly why: string
  /** `EXEC_ROOT` where a sandbox can be shown there, else undefined and why not. */
  readonly root: string | undefined
  readonly rootWhy: string
}

let probed: Probed | undefined

const probedHere = (): Probed => {
  if (probed === undefined) probed = probeOnce()
  return probed
}

/**
 * Whether mounts work here, tried once per process with a real mount of a scratch directory (a kernel or a security
 * module may refuse what the user id allows): the mode that works, or `undefined` and why not.
 */
export const probe = (): { readonly mode: Mode | undefined; readonly why: string } => {
  const { mode, why } = probedHere()
  return { mode, why }
}

/**
 * `EXEC_ROOT` where this machine can show a sandbox there (tried once per process, with a real sandbox-like
 * directory and a read-only mount inside it), else `undefined` and why not: then processes run at their sandbox's
 * own path, and their keys say so (see `Process.execRoot`).
 */
export const execRoot = (): { readonly root: string | undefined; readonly why: string } => {
  const { root, rootWhy } = probedHere()
  return { root, why: rootWhy }
}

const off = (why: string): Probed => ({ mode: undefined, why, root: undefined, rootWhy: why })

/**
 * One program run in the common case (a probe costs an engine's start as much as its first process): a sandbox
 * shown at `EXEC_ROOT` with a read-only mount inside it, which shows that both work. Only where that fails is a
 * mount alone tried, for shared trees.
 */
const probeOnce = (): Probed => {
  if (process.platform !== "linux") return off("mount namespaces are Linux's")
  if (process.env[KNOB] === "0") return off(`${KNOB}=0`)
  try {
    toolsOrThrow()
  } catch (e) {
    return off((e as Error).message)
  }
  const mode: Mode = process.getuid!() === 0 ? "root" : "user"
  const execRootIsDirectory = fs.statSync(EXEC_ROOT, { throwIfNoEntry: false })?.isDirectory() === true
  // The common case, answered by an earlier run: no scratch directory to make.
  if (execRootIsDirectory && rememberedAnswer("pinned") === null) return { mode, why: "", root: EXEC_ROOT, rootWhy: "" }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-mount-probe-"))
  try {
    const source = path.join(scratch, "source")
    const sandbox = path.join(scratch, "sandbox")
    const target = path.join(sandbox, "shared")
    fs.mkdirSync(path.join(source, "wd"), { recursive: true })
    fs.mkdirSync(target, { recursive: true })
    fs.writeFileSync(path.join(source, "marker"), "")
    // Builtins and a subshell only: `touch` would be another program to start.
    const readOnly = `test -e "$0/marker" && ! ( : > "$0/new" ) 2>/dev/null`
    let rootWhy = `${EXEC_ROOT} is not a directory here`
    if (execRootIsDirectory) {
      const cwd = `${EXEC_ROOT}/shared/wd`
      const pinned = ranRemembered(
        "pinned",
        () =>
          wrap(mode, [{ source, target }], [SH, "-c", `[ "$(pwd -P)" = "$1" ] && ${readOnly}`, `..`, cwd], {}, {
            sandbox,
            cwd
          })
      )
      if (pinned === undefined) return { mode, why: "", root: EXEC_ROOT, rootWhy: "" }
      rootWhy = pinned.why
    }
    const plain = ranRemembered("plain", () => wrap(mode, [{ source, target }], [SH, "-c", readOnly, target], {}))
    return plain === undefined ? { mode, why: "", root: undefined, rootWhy } : off(plain.why)
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

/**
 * Probe answers kept between runs (see {@link rememberProbesIn}): each probe starts programs, which costs a run as
 * much as a process of its own, and the answer cannot change while what decides it stays as it is.
 */
let remembered:
  | { readonly file: string; readonly key: string; readonly answers: Record<string, string | null> }
  | undefined

/**
 * What decides whether a probe passes: this boot, this user, the namespaces kiln runs in (another container is
 * another answer), its capabilities and seccomp mode, the kernel, and the sysctls that allow user namespaces. Any of
 * them changed, the probes run again. Undefined where one cannot be read: then nothing is remembered.
 */
const probeKey = (): string | undefined => {
  try {
    const boot = bootIdText()
    if (boot === undefined) return undefined
    const status = fs.readFileSync("/proc/self/status", "utf8").split("\n")
      .filter((l) => /^(Cap(Inh|Prm|Eff|Bnd|Amb)|Seccomp|NoNewPrivs):/.test(l))
    const namespaces = ["user", "mnt", "pid", "net", "ipc", "cgroup"].map((n) => fs.readlinkSync(`/proc/self/ns/${n}`))
    const sysctls = [
      "/proc/sys/kernel/unprivileged_userns_clone",
      "/proc/sys/user/max_user_namespaces",
      "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
    ].map((f) => fs.existsSync(f) ? fs.readFileSync(f, "utf8").trim() : "-")
    return JSON.stringify([process.getuid!(), boot.trim(), os.release(), namespaces, status, sysctls, EXEC_ROOT])
  } catch {
    return undefined
  }
}

/**
 * Keeps this machine's probe answers in `file` (in a directory only this user can write: the store's, which the
 * caller has checked), and reads those an earlier run kept there under the same {@link probeKey}.
 */
export const rememberProbesIn = (file: string): void => {
  const key = probeKey()
  if (key === undefined) return
  let answers: Record<string, string | null> = {}
  try {
    const kept = JSON.parse(fs.readFileSync(file, "utf8")) as { key?: unknown; answers?: unknown }
    if (kept.key === key && typeof kept.answers === "object" && kept.answers !== null) {
      answers = Object.fromEntries(
        Object.entries(kept.answers).filter(([, v]) => v === null || typeof v === "string")
      ) as Record<string, string | null>
    }
  } catch {
    // None kept yet, or unreadable: probed afresh, and kept.
  }
  remembered = { file, key, answers }
}

/** What an earlier run kept for probe `label` (null: it passed), if anything. */
const rememberedAnswer = (label: string): string | null | undefined =>
  remembered?.answers[`${label} ${JSON.stringify(tools)}`]

/** {@link ran}, answered from what an earlier run kept when it ran the same probe (`label`) under the same key. */
const ranRemembered = (
  label: string,
  argv: () => ReadonlyArray<string>
): { readonly why: string } | undefined => {
  const at = `${label} ${JSON.stringify(tools)}`
  const known = rememberedAnswer(label)
  if (known !== undefined) return known === null ? undefined : { why: known }
  const r = ran(argv())
  if (remembered !== undefined) {
    remembered.answers[at] = r?.why ?? null
    try {
      AtomicFile.write(remembered.file, JSON.stringify({ key: remembered.key, answers: remembered.answers }))
    } catch {
      // Not kept: the next run probes again.
    }
  }
  return r
}

/** Runs a probe: undefined when it passed, else why not. */
const ran = (argv: ReadonlyArray<string>): { readonly why: string } | undefined => {
  const r = childProcess.spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", env: {}, timeout: 10_000 })
  if (r.status === 0) return undefined
  const said = `${r.stderr ?? ""}`.trim().split("\n")[0] ?? ""
  return { why: said !== "" ? said : `the probe exited with ${r.status ?? r.signal}` }
}

/** Set to `0`, no process gets the strict view (as `--sandbox off`): for debugging, and to compare costs. */
export const STRICT_KNOB = "KILN_STRICT_VIEW"

let strictProbed: { readonly works: boolean; readonly why: string } | undefined

/**
 * Whether this machine can make the strict view (see {@link View}), tried once per process by a child that makes
 * its namespaces (user when not root, mount, PID, IPC, network) and mounts a `/proc` of its own, where a container
 * or a hardened kernel refuses one. When it cannot, `why` names what failed, its errno, and what to check.
 */
export const strictProbe = (): { readonly works: boolean; readonly why: string } => {
  if (strictProbed === undefined) strictProbed = probeStrict()
  return strictProbed
}

const ERRNOS: ReadonlyArray<readonly [string, string]> = [
  ["Operation not permitted", "EPERM"],
  ["Permission denied", "EACCES"],
  ["No space left on device", "ENOSPC"],
  ["Invalid argument", "EINVAL"],
  ["Function not implemented", "ENOSYS"]
]

/** What to look at when `mode`'s namespaces are refused. */
const toCheck = (mode: Mode) =>
  mode === "user"
    ? "check the sysctls kernel.unprivileged_userns_clone (1) and user.max_user_namespaces (above 0), and AppArmor's " +
      "kernel.apparmor_restrict_unprivileged_userns (0, or a profile allowing userns for node)"
    : "a container needs CAP_SYS_ADMIN, and a seccomp profile and AppArmor profile that allow unshare, mount and " +
      "pivot_root"

const probeStrict = (): { readonly works: boolean; readonly why: string } => {
  if (process.platform !== "linux") return { works: false, why: "the strict view is Linux's" }
  if (process.env[STRICT_KNOB] === "0") return { works: false, why: `${STRICT_KNOB}=0` }
  const { mode, why } = probe()
  if (mode === undefined) return { works: false, why: `mount namespaces do not work here (${why})` }
  if (ViewScript.viewTools() === undefined) {
    return { works: false, why: "util-linux's mount, umount or pivot_root, or mkdir or ln, is missing" }
  }
  const unshare = toolsOrThrow().unshare
  const r = ranRemembered("strict", () => [
    unshare,
    ...(mode === "user" ? ["--user", "--map-root-user"] : []),
    "--mount",
    "--propagation",
    "private",
    "--pid",
    "--fork",
    "--mount-proc",
    "--ipc",
    "--net",
    SH,
    "-c",
    "[ -d /proc/self ]"
  ])
  if (r === undefined) return { works: true, why: "" }
  const errno = ERRNOS.find(([text]) => r.why.includes(text))?.[1]
  return { works: false, why: `${r.why}${errno !== undefined ? ` (${errno})` : ""}: ${toCheck(mode)}` }
}
