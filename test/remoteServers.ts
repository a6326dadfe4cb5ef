/**
 * The remote-cache servers (scripts/remote/servers.sh: Bazel's REAPI workers, nginx and bst-artifact-server, on
 * 127.0.0.1): when they run (`.ci/run` starts them), their `KILN_TEST_*` variables are loaded into the environment the
 * test workers are forked with; otherwise they are started here (only those not running, when some are), and stopped
 * when the run ends if this run started them all. KILN_SKIP_REMOTE_SERVERS=1 skips them: the tests that need them
 * then fail, from `remoteServers()` (test/utils/remote.ts).
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { loadRemoteEnv, readRemoteEnv, remoteEnvAlive, serversScript } from "./utils/remote.js"

const servers = (command: "start" | "stop") =>
  promisify(execFile)("bash", [serversScript, command], { timeout: 10 * 60_000, maxBuffer: 16 << 20 })

export default async function setup() {
  if (process.env.KILN_SKIP_REMOTE_SERVERS === "1") return
  const running = readRemoteEnv()
  if (running && remoteEnvAlive(running)) return loadRemoteEnv(running)
  try {
    await servers("start")
  } catch (e) {
    const stderr = String((e as { stderr?: unknown }).stderr ?? "")
    const why = stderr.split("\n").filter((l) => l.includes("ERROR")).pop() ?? String(e).split("\n")[0]
    throw new Error(
      `The remote-cache test servers did not start: ${why?.replace(/^\[servers.sh\] ERROR: /, "")}. ` +
        `scripts/remote/servers.sh needs Debian's bazel-bootstrap-data bazel-bootstrap-source nginx python3-buildstream ` +
        `libnetty-tcnative-jni, bazel-bootstrap (for linux-sandbox) and a JDK (it runs apt-get install as root), ` +
        `and free ports (see README); ` +
        `KILN_SKIP_REMOTE_SERVERS=1 runs the tests without them (those that need them then fail).`
    )
  }
  const env = readRemoteEnv()
  if (!env) throw new Error("scripts/remote/servers.sh start wrote no env file")
  loadRemoteEnv(env)
  // Stopped at the end only when this run started them (not when it only restarted one that a test killed).
  if (!running) return () => servers("stop").then(() => {})
}
