/**
 * The strict view (`MountNamespace.View`) made with util-linux: what the native spawner does with the system calls
 * (`programs/spawner/native/root.c`), for the Node spawner and a kept sandbox's `__run.sh`. `unshare --pid --fork`
 * makes the namespaces and a shell PID 1 in them; the shell mounts the new root, pivots into it, and runs the process
 * as its child, so that every descendant ends with it and `/proc` shows only its own.
 *
 * It costs a mount(8) per mount (some thirty programs per process, where the native spawner makes none), and it
 * differs from the native view in three ways a process can see: the process's exit by a signal is reported as the
 * shell's status 128 + the signal; it starts with SIGINT and SIGQUIT ignored (a non-interactive shell's background
 * job); and its loopback is up only where iproute2's `ip` is installed.
 *
 * The root is built over `/sys` (a tmpfs there, in the process's own mount namespace): a shell cannot hold a
 * directory open to bind it later, so the staging directory must hide nothing the view is made from, and no sandbox,
 * input or host path a process may name lives under `/sys`.
 *
 * Plain Node, no Effect.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** The system directories every view shows, read-only: see `native/root.c` for why each. */
export const SYSTEM_DIRS = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"] as const

const DEVICES = ["null", "zero", "full", "random", "urandom", "tty"] as const

const STAGE = "/sys"

/** `s` quoted for sh. */
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

/** The tools the script runs: absolute, as its PATH is the process's. */
export interface ViewTools {
  readonly mount: string
  readonly umount: string
  readonly pivotRoot: string
  readonly mkdir: string
  readonly ln: string
  /** iproute2's `ip`, where there is one: the loopback is brought up with it. */
  readonly ip: string | undefined
}

const firstExisting = (candidates: ReadonlyArray<string>) => candidates.find((c) => fs.existsSync(c))

const inBins = (name: string) => ["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map((d) => `${d}/${name}`)

let found: ViewTools | null | undefined

/** The tools, or undefined when one is missing (then the Node spawner cannot make the view). */
export const viewTools = (): ViewTools | undefined => {
  if (found === undefined) {
    const mount = firstExisting(inBins("mount"))
    const umount = firstExisting(inBins("umount"))
    const pivotRoot = firstExisting(inBins("pivot_root"))
    const mkdir = firstExisting(inBins("mkdir"))
    const ln = firstExisting(inBins("ln"))
    found = mount === undefined || umount === undefined || pivotRoot === undefined || mkdir === undefined ||
        ln === undefined
      ? null
      : { mount, umount, pivotRoot, mkdir, ln, ip: firstExisting(inBins("ip")) }
  }
  return found ?? undefined
}

/** What the host has of the system directories: a directory to bind, or a symlink to make again (merged-/usr). */
const systemDirs = (): Array<{ readonly name: string; readonly link: string | undefined }> =>
  SYSTEM_DIRS.flatMap((d): Array<{ readonly name: string; readonly link: string | undefined }> => {
    const st = fs.lstatSync(`/${d}`, { throwIfNoEntry: false })
    if (st?.isSymbolicLink() === true) return [{ name: d, link: fs.readlinkSync(`/${d}`) }]
    return st?.isDirectory() === true ? [{ name: d, link: undefined }] : []
  })

/** What the view is made of, beyond the mounts the shell makes first. */
export interface ViewPlan {
  readonly sandbox: string
  /** Where the process sees its sandbox, and the directory it starts in. */
  readonly root: string
  readonly cwd: string
  readonly hostPaths: ReadonlyArray<string>
  /** Shown read-write (named caches). */
  readonly writablePaths: ReadonlyArray<string>
  readonly network: boolean
}

/**
 * The part of the script that builds the root and pivots into it, run after the shell's mounts: a subshell whose
 * failure ends the script with 125 before the process starts, then the pivot (which must be the shell's own: its
 * directory changes).
 */
export const viewLines = (tools: ViewTools, plan: ViewPlan): Array<string> => {
  const M = tools.mount
  const dirs = systemDirs()
  const rel = (p: string) => q(`.${p}`)
  const shown = [...plan.hostPaths, ...plan.writablePaths]
  const hostDirs = shown.filter((p) => fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() === true)
  const hostFiles = shown.filter((p) => !hostDirs.includes(p))
  const devices = DEVICES.filter((d) => fs.existsSync(`/dev/${d}`))
  const setup = [
    `set -e`,
    `${M} -t tmpfs -o mode=0755,nosuid,nodev tmpfs ${STAGE}`,
    `cd ${STAGE}`,
    `${tools.mkdir} -p ${
      [...dirs.filter((d) => d.link === undefined).map((d) => d.name), "tmp", "dev", "proc"].join(" ")
    }`,
    ...dirs.flatMap((d) => d.link === undefined ? [] : [`${tools.ln} -s -- ${q(d.link)} ${d.name}`]),
    ...dirs.flatMap((d) => d.link === undefined ? [`${M} --rbind -o ro /${d.name} ${d.name}`] : []),
    `${M} -t tmpfs -o mode=1777,nosuid,nodev tmpfs tmp`,
    `${M} -t tmpfs -o mode=0755,nosuid tmpfs dev`,
    ...devices.map((d) => `: > dev/${d}; ${M} --bind /dev/${d} dev/${d}`),
    `${tools.ln} -s /proc/self/fd dev/fd`,
    ...["stdin", "stdout", "stderr"].map((n, i) => `${tools.ln} -s /proc/self/fd/${i} dev/${n}`),
    `${tools.mkdir} dev/shm`,
    `${M} -t tmpfs -o mode=1777,nosuid,nodev tmpfs dev/shm`,
    `${M} -o remount,bind,ro,nosuid dev`,
    `${M} -t proc -o nosuid,nodev,noexec proc proc`,
    `${tools.mkdir} -p ${rel(plan.root)}`,
    `${M} --rbind -- ${q(plan.sandbox)} ${rel(plan.root)}`,
    ...hostDirs.map((p) => `${tools.mkdir} -p -- ${rel(p)}`),
    ...hostFiles.flatMap((p) => [`${tools.mkdir} -p -- ${rel(path.dirname(p))}`, `[ -e ${rel(p)} ] || : > ${rel(p)}`]),
    ...plan.hostPaths.map((p) => `${M} --rbind -o ro -- ${q(p)} ${rel(p)}`),
    ...plan.writablePaths.map((p) => `${M} --rbind -- ${q(p)} ${rel(p)}`),
    ...(!plan.network && tools.ip !== undefined ? [`${tools.ip} link set lo up`] : [])
  ]
  return [
    `( ${setup.join("\n")}\n)`,
    `[ $? -eq 0 ] || exit 125`,
    `cd ${STAGE} && ${tools.pivotRoot} . . && ${tools.umount} -l . && cd / || exit 125`,
    `${M} -o remount,bind,ro,nosuid,nodev / && cd -- ${q(plan.cwd)} || exit 125`
  ]
}
