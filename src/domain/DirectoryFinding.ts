/**
 * Why a directory kiln would keep its state in is unsafe (another user owns it or can write it), as plain data and
 * one line of text. Plain code without Effect: the CLI's no-op check judges the store's root with it (through
 * `os/PrivateDir.ts`) before Effect is loaded.
 *
 * @internal
 */
import * as path from "node:path"

/** What makes a directory unsafe: the directory, its owner and mode, and why. */
export interface Finding {
  readonly path: string
  readonly owner: number
  readonly mode: number
  readonly problem: string
}

/** `0777`, `2770`: a mode as `chmod` takes it. */
export const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, "0")

/** One line naming the root, the directory at fault with its owner and mode, and why. */
export const describe = (role: string, root: string, f: Finding): string => {
  const what = `(owner uid ${f.owner}, mode ${octal(f.mode)})`
  return path.resolve(root) === f.path
    ? `refusing the ${role} ${f.path} ${what}: it ${f.problem}`
    : `refusing the ${role} ${path.resolve(root)}: ${f.path} ${what} ${f.problem}`
}
