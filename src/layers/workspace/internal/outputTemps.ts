/**
 * The temp files write-back makes beside an output before renaming each over it: `.<name>.kiln-<pid>-<start>-<n>`,
 * named by their maker (pid and start time, so that a recycled pid is not taken for the kiln that made the file).
 * A kiln killed during write-back leaves one behind; a later write-back removes those whose maker is dead, and never
 * those of a kiln that still runs (it is about to rename it into place).
 *
 * @internal
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Proc from "../../../os/Proc.js"

/** The pid, start time (absent in names made before it was part of them) and counter of a temp file's name. */
const TEMP = /^\..*\.kiln-(\d+)-(?:(\d*)-)?[0-9a-z]+$/

/** Longest part of an output's name kept in its temp's: the rest of the name must fit in NAME_MAX (255). */
const NAME_KEPT = 200

let count = 0
let stamp: string | undefined

/** A temp path beside `target`, unique to this process and this write. */
export const tempBeside = (target: string): string => {
  stamp ??= `${process.pid}-${Proc.startTimeOf(process.pid) ?? ""}`
  // `target` is a joined path already: split at its last slash rather than normalized again by `path`.
  const slash = target.lastIndexOf("/")
  const name = target.slice(slash + 1, slash + 1 + NAME_KEPT)
  return `${target.slice(0, slash)}/.${name}.kiln-${stamp}-${(count++).toString(36)}`
}

/** Who made the temp file named `name`; undefined when the name is not one of write-back's temp files. */
export const makerOf = (name: string): Proc.Owner | undefined => {
  if (name.charCodeAt(0) !== 46 || !name.includes(".kiln-")) return undefined
  const m = TEMP.exec(name)
  return m === null ? undefined : { pid: Number(m[1]), startTime: m[2] ?? "" }
}

/** Whether `name` is a temp file of a kiln that still runs (this one included). */
export const isLiveTemp = (name: string): boolean => {
  const maker = makerOf(name)
  return maker !== undefined && Proc.ownerAlive(maker)
}

/** Removes from `dir` the temp files of kilns that died (each a file: a temp is renamed into place whole). */
export const removeDead = (dir: string): void => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) continue
    const maker = makerOf(entry.name)
    if (maker !== undefined && !Proc.ownerAlive(maker)) fs.rmSync(path.join(dir, entry.name), { force: true })
  }
}
