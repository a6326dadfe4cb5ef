/**
 * The LMDB addon kiln runs: built at install (scripts/patch-lmdb.mjs) from lmdb's source with kiln's fixes (commits
 * that a concurrent opener made other processes lose; locks a closing process destroyed under an opener; a heap
 * overflow, and a crash of threads sharing its message, when a full disk fails a page write), and a warning when a
 * process runs without them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { loadedAddonIsFixed, preload } from "../../src/layers/store/internal/lmdb/envs.js"
import { cli } from "../utils/stack.js"
import { tempDir } from "../utils/temp.js"

const WARNING = "is not the one built with kiln's LMDB fixes"

describe("lmdb's native addon", () => {
  it.effect("is the build from the source with kiln's fixes, and this process loaded it", () =>
    Effect.gen(function*() {
      yield* preload
      assert.isTrue(loadedAddonIsFixed())
      // lmdb's CommonJS entry is dist/index.cjs.
      const lmdbDir = path.resolve(path.dirname(createRequire(import.meta.url).resolve("lmdb")), "..")
      const source = fs.readFileSync(path.join(lmdbDir, "dependencies/lmdb/libraries/liblmdb/mdb.c"), "utf8")
      assert.include(source, "\tif (prev && env->me_txns)\n\t\tenv->me_txns->mti_txnid = meta.mm_txnid;\n")
      // No process destroys the robust mutexes of lock.mdb on close any more (LMDB ITS#10095).
      assert.notInclude(source, "pthread_mutex_destroy(env->me_txns->mti_wmutex)")
      assert.include(source, "kiln: robust mutexes are left as they are (LMDB ITS#10095)")
      // The message for a page write that failed is bounded (it overran its heap buffer on a full disk), and formatted
      // in a buffer of its own, not in the process-wide `last_error` that other threads take meanwhile (SIGSEGV).
      assert.notInclude(source, "sprintf(last_error, \"Attempting to write page")
      assert.notInclude(source, "snprintf(last_error + at")
      assert.include(source, "snprintf(message, sizeof message, \"Attempting to write page")
      assert.include(source, "__atomic_store_n(&last_error, published, __ATOMIC_RELEASE);")
      // ... and mdb_strerror takes it once, atomically.
      assert.include(source, "char *taken_error = __atomic_exchange_n(&last_error, NULL, __ATOMIC_ACQ_REL);")
    }))

  it.scoped("a kiln process running the prebuilt addon says so on stderr; with the fixed one it says nothing", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-addon-")
      const stats = (env: Record<string, string>) =>
        spawnSync(process.execPath, [cli, "store", "stats", "--store-dir", path.join(root, "store")], {
          encoding: "utf8",
          env: { ...process.env, ...env }
        })
      const fixed = stats({})
      assert.strictEqual(fixed.status, 0, fixed.stderr)
      assert.notInclude(fixed.stderr, WARNING)
      const prebuilt = stats({ PREBUILDS_ONLY: "1" })
      assert.strictEqual(prebuilt.status, 0, prebuilt.stderr)
      assert.include(prebuilt.stderr, WARNING)
    }))
})
