import * as path from "node:path"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    // The second starts the remote-cache servers (or finds them running) and gives the workers their KILN_TEST_* env.
    globalSetup: ["test/globalSetup.ts", "test/remoteServers.ts"],
    // The spawner program built from its sources by the global setup: kiln run from src/ has no dist/ beside it.
    env: { KILN_SPAWNER: path.resolve(".kiln-test/spawner.cjs") },
    testTimeout: 120_000,
    hookTimeout: 60_000
  }
})
