import * as path from "node:path"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    // Two test files at a time. Vitest's default on a 2-CPU machine is one (CPUs - 1), and most of a file's time is
    // spent waiting on the processes and servers it starts. No test depends on the machine being idle (none has a
    // timing threshold).
    maxWorkers: 2,
    minWorkers: 1,
    // The second starts the remote-cache servers (or finds them running) and gives the workers their KILN_TEST_* env.
    globalSetup: ["test/globalSetup.ts", "test/remoteServers.ts"],
    // The spawner program built from its sources by the global setup, the native one as kiln's build makes it: kiln
    // run from src/ has no dist/ beside it. test/spawner/ also runs the Node one (.kiln-test/spawner.cjs).
    // Workspace locks of the CLIs the tests start go there too, not into the user's ~/.cache/kiln/locks.
    // The lstat addon likewise (src/os/StatMany.ts).
    env: {
      KILN_SPAWNER: path.resolve(".kiln-test/kiln-spawner"),
      KILN_LSTAT_ADDON: path.resolve(".kiln-test/kiln-lstat.node"),
      KILN_LOCK_DIR: path.resolve(".kiln-test/locks"),
      // No test's run leaves a standby engine behind (test/cli/standby.test.ts turns them on in its own runs).
      KILN_STANDBY: "off"
    },
    testTimeout: 120_000,
    hookTimeout: 60_000
  }
})
