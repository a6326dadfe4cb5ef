/**
 * The one place that turns Node's errno exceptions into kiln's typed errors: a `StoreError` naming the path, with
 * a full disk (`ENOSPC`, `EDQUOT`) told apart.
 *
 * @internal
 */
import { StoreError } from "../domain/StoreErrors.js"
import { describeErrno, errnoOf } from "./Errno.js"

/** @internal */
export const ioError = (path: string, action: string) => (e: unknown): StoreError => {
  const code = errnoOf(e)
  return new StoreError({
    reason: code === "ENOSPC" || code === "EDQUOT" ? "NoSpace" : "Io",
    detail: `${action}: ${describeErrno(e)}`,
    path
  })
}
