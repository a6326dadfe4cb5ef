/**
 * Writing a file the user named on the command line (`--summary`, `--trace`): created or truncated as a regular file,
 * never written through a symlink (a committed `summary.json` that links out of the workspace would have kiln
 * overwrite its target), never waited on (a FIFO with no reader is refused at once, not an open that signals cannot
 * end), and never a device. Plain code without Effect: the no-op check writes the summary before anything is loaded.
 */
import * as fs from "node:fs"
import { errnoOf } from "./Errno.js"
import { writeAll } from "./WriteAll.js"

/** Writes `text` to `file`; undefined once written, else why not (one phrase, to follow the flag and the path). */
export const writeReportFile = (file: string, text: string): string | undefined => {
  let fd: number
  try {
    const { O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_TRUNC, O_WRONLY } = fs.constants
    fd = fs.openSync(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0o666)
  } catch (e) {
    const code = errnoOf(e)
    return code === "ELOOP"
      ? "is a symlink, which kiln does not write through (`-` is stdout)"
      : code === "ENXIO"
      ? "is a FIFO nothing reads"
      : code === "EISDIR"
      ? "is a directory"
      : `cannot be written: ${code ?? String(e)}`
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return "is not a regular file"
    writeAll(fd, Buffer.from(text))
    return undefined
  } catch (e) {
    return `cannot be written: ${errnoOf(e) ?? String(e)}`
  } finally {
    fs.closeSync(fd)
  }
}
