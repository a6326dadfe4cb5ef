/**
 * Where kiln keeps its caches: `$<envVar>` when set, else `$XDG_CACHE_HOME/kiln/<name>`, else
 * `~/.cache/kiln/<name>`. Portable: nothing here is Linux-specific.
 *
 * @internal
 */
import * as os from "node:os"
import * as path from "node:path"

/** @internal */
export const cacheDir = (name: string, envVar: string, env: NodeJS.ProcessEnv): string => {
  const override = env[envVar]
  if (override !== undefined && override !== "") return path.resolve(override)
  const xdg = env.XDG_CACHE_HOME
  return path.join(xdg !== undefined && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".cache"), "kiln", name)
}
