/**
 * A root kiln keeps its state in (the sandbox root, the named caches, the workspace locks), checked as an effect:
 * apart from `PrivateDir.ts`, which is plain Node because the CLI's no-op check uses it before Effect is loaded.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { UnsafeDirectory } from "../domain/UnsafeDirectory.js"
import * as PrivateDir from "./PrivateDir.js"

/**
 * Checks `root` as {@link PrivateDir.inspect} does, making it (0700) with `create` when it is missing. A failure to look or to
 * make it is left to whoever uses the root next, which reports it in its own terms.
 *
 * @internal
 */
export const verify = (
  role: string,
  root: string,
  sharing: PrivateDir.Sharing,
  options: { readonly create?: boolean } = {}
): Effect.Effect<void, UnsafeDirectory> =>
  Effect.suspend(() => {
    let found: PrivateDir.Finding | undefined
    try {
      found = options.create === true ? PrivateDir.ensure(root, sharing) : PrivateDir.inspect(root, sharing)
    } catch {
      return Effect.void
    }
    return found === undefined
      ? Effect.void
      : Effect.fail(new UnsafeDirectory({ role, root, ...found }))
  })
