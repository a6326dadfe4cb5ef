import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    globalSetup: ["test/globalSetup.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000
  }
})
