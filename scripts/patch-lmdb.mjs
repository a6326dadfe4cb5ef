/**
 * Run by `npm install`/`npm ci` (postinstall): fixes four bugs in the LMDB that lmdb-js bundles and builds lmdb's
 * native addon from that source, which lmdb then loads instead of its prebuilt one (`build/Release` comes first).
 *
 * 1. Lost commits (`open-txnid`): `mdb_env_open2` in lmdb-js's LMDB fork stores the transaction id it read from the
 *    data file before mapping it into the shared "last committed transaction" of `lock.mdb`, in every process that
 *    opens the environment. When another process commits in between, that id goes back by one: readers then see the
 *    older snapshot, and the next writer commits over the newer one, so entries whose writes had resolved are gone
 *    for good (and a writer further behind fails with `MDB_PROBLEM: mdb_page_touch no parent`). kiln has many
 *    processes opening the same shards all the time; a stress test of that pattern (scripts/stress/lmdbOpenRace.mjs)
 *    lost committed entries within minutes with the prebuilt addon and none with this fix. Upstream LMDB sets that
 *    id only in the process that opens the environment first (and with MDB_PREVSNAPSHOT): the fix is that one
 *    condition.
 * 2. Destroyed locks (`close-keeps-mutexes`): a process closing an environment it believes it is the last user of
 *    (it got the exclusive file lock) destroys the robust mutexes in `lock.mdb`. A process opening the environment at
 *    that moment waits for a shared file lock, gets it once the closer is done, and goes on with the destroyed
 *    mutexes: its write transactions fail with EINVAL ("cannot open the LMDB environment: failed (EINVAL)"), as do
 *    those of every process that opens the environment until all have closed it. Upstream LMDB removed that
 *    destruction in 0.9.32 (ITS#10095; Heimdal, fapolicyd and CFEngine hit the same EINVAL); the next first opener
 *    initializes the mutexes anyway. scripts/stress/lmdbCloseRace.mjs runs that pattern (the window is a few
 *    microseconds: it takes a busy machine, or a delay injected into LMDB's close, to hit it; see there).
 * 3. Heap overflow on a full disk (`write-error-message`): when a page write fails (ENOSPC), lmdb-js's
 *    `mdb_page_flush` formats a message for the error with `sprintf` into `malloc(100)`. The message runs past those
 *    100 bytes once the numbers in it grow (a commit of a dozen 500 KB values at 10 MB into the data file: 106
 *    bytes), and for a write of fewer than three blocks it also prints `iov[1]`/`iov[2]`, which that write left unset,
 *    so its length varies from run to run. The overflow overwrites the size of the next heap chunk, and glibc later
 *    aborts the process (`corrupted size vs. prev_size`, `free(): invalid pointer`, exit 134) in the failed commit or
 *    in `mdb_env_close`. The fix formats the same message with `snprintf` into a buffer sized for it, with only the
 *    blocks the write has (test/store/FullDiskClose.test.ts), in a buffer of its own, and publishes it whole (4.).
 * 4. A crash on a full disk (`error-message-handoff`): that message goes to the JS thread through `last_error`, one
 *    pointer for the whole process, which the write thread of every environment sets and `mdb_strerror` takes (and
 *    clears) on whichever thread reports an error. kiln's store has several environments (its shards), whose
 *    commits fail together when the disk fills: kiln's first version of fix 3, formatting into `last_error` itself,
 *    found it taken (NULL) by the JS thread between two `snprintf`s and wrote at address 0x4e (SIGSEGV, exit 139,
 *    in `mdb_page_flush`; 2 of 600 runs of test/store/FullDisk.test.ts's worker, 8 at once); lmdb-js's own
 *    code let `mdb_strerror` copy a message still being formatted. Now a message is formatted in a local buffer and
 *    published with one atomic store, and `mdb_strerror` takes it once with an atomic exchange.
 *    scripts/stress/lmdbErrorRace.mjs runs that pattern.
 *
 * Set KILN_LMDB_PREBUILT=1 to keep the prebuilt addon (kiln then warns at start-up that its store is exposed). When
 * the build cannot be done (no compiler), the install still succeeds, with that warning.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"

const say = (line) => process.stderr.write(`kiln: ${line}\n`)

if (process.env.KILN_LMDB_PREBUILT === "1") {
  say(
    "KILN_LMDB_PREBUILT=1: keeping lmdb's prebuilt addon, without kiln's fixes (see scripts/patch-lmdb.mjs)"
  )
  process.exit(0)
}

const require = createRequire(import.meta.url)
/**
 * The install goes on with lmdb's prebuilt addon (kiln warns at every start that its store is exposed, and kiln's
 * own test of the addon fails): a machine without a compiler still gets a working kiln, and says why it is not safe.
 */
const fail = (line) => {
  say(`WARNING: cannot build lmdb's addon with kiln's fixes: ${line}`)
  say("WARNING: kiln will use lmdb's prebuilt addon; run `node scripts/patch-lmdb.mjs` once the tools are there")
  process.exit(0)
}

/** lmdb's package directory (its `exports` hide package.json from `require.resolve`). */
const lmdbDir = (() => {
  let dir = path.dirname(require.resolve("lmdb"))
  while (path.basename(dir) !== "lmdb" || !fs.existsSync(path.join(dir, "package.json"))) {
    if (path.dirname(dir) === dir) fail(`no lmdb package above ${require.resolve("lmdb")}`)
    dir = path.dirname(dir)
  }
  return dir
})()
const version = JSON.parse(fs.readFileSync(path.join(lmdbDir, "package.json"), "utf8")).version
const source = path.join(lmdbDir, "dependencies/lmdb/libraries/liblmdb/mdb.c")
/**
 * Each fix replaces exactly one text of `mdb.c` (`buggy`: lmdb's, or a list: lmdb's, then an earlier version of the
 * fix, which a source fixed by an older kiln holds); kiln checks that the addon it loads was built with every one.
 */
const FIXES = [
  {
    id: "open-txnid",
    buggy: "\tif (env->me_txns)\n\t\tenv->me_txns->mti_txnid = meta.mm_txnid;\n",
    fixed: "\tif (prev && env->me_txns)\n\t\tenv->me_txns->mti_txnid = meta.mm_txnid;\n"
  },
  {
    id: "close-keeps-mutexes",
    buggy: [
      "#elif defined(MDB_ROBUST_SUPPORTED)",
      "\t\t/* If we have the filelock:\tIf we are the",
      "\t\t * only remaining user, clean up robust",
      "\t\t * mutexes.",
      "\t\t */",
      "\t\tif (excl == 0)",
      "\t\t\tmdb_env_excl_lock(env, &excl);",
      "\t\tif (excl > 0) {",
      "\t\t\tpthread_mutex_destroy(env->me_txns->mti_rmutex);",
      "\t\t\tpthread_mutex_destroy(env->me_txns->mti_wmutex);",
      "\t\t\tpthread_mutex_destroy(env->me_txns->mti_sync_mutex);",
      "\t\t}",
      "#endif",
      ""
    ].join("\n"),
    fixed: [
      "#elif defined(MDB_ROBUST_SUPPORTED)",
      "\t\t/* kiln: robust mutexes are left as they are (LMDB ITS#10095): destroying them here raced with",
      "\t\t * another process opening the environment, which then used destroyed mutexes.",
      "\t\t */",
      "#endif",
      ""
    ].join("\n")
  },
  {
    id: "write-error-message",
    buggy: [
      [
        "\t\t\t\t\t\tlast_error = malloc(100);",
        "\t\t\t\t\t\tsprintf(last_error, \"Attempting to write page at position %u, size %u, blocks %u, buffer sizes %i %i %i\", " +
        "wpos, wsize, n, iov[0].iov_len, iov[1].iov_len, iov[2].iov_len);",
        ""
      ].join("\n"),
      // kiln's first version of this fix, which formatted into `last_error` itself (see `error-message-handoff`).
      [
        "\t\t\t\t\t\t/* kiln: sprintf into malloc(100) overran it once the numbers grew (and printed iov[1] and iov[2]",
        "\t\t\t\t\t\t * unset when fewer blocks were written), corrupting the heap: glibc then aborted the process.",
        "\t\t\t\t\t\t * Bounded now; 200 bytes also keep mdb_strerror's 300 (strerror, \": \", this) in bounds.",
        "\t\t\t\t\t\t */",
        "\t\t\t\t\t\tlast_error = malloc(200);",
        "\t\t\t\t\t\tif (last_error) {",
        "\t\t\t\t\t\t\tint at = snprintf(last_error, 200, \"Attempting to write page at position %llu, size %llu, blocks %d, " +
        "buffer sizes\", (unsigned long long) wpos, (unsigned long long) wsize, n);",
        "\t\t\t\t\t\t\tfor (int b = 0; b < n && b < 3 && at >= 0 && at < 200; b++)",
        "\t\t\t\t\t\t\t\tat += snprintf(last_error + at, 200 - at, \" %llu\", (unsigned long long) iov[b].iov_len);",
        "\t\t\t\t\t\t}",
        ""
      ].join("\n")
    ],
    fixed: [
      "\t\t\t\t\t\t/* kiln: sprintf into malloc(100) overran it once the numbers grew (and printed iov[1] and iov[2]",
      "\t\t\t\t\t\t * unset when fewer blocks were written), corrupting the heap: glibc then aborted the process.",
      "\t\t\t\t\t\t * Bounded now; 200 bytes also keep mdb_strerror's 300 (strerror, \": \", this) in bounds. Formatted",
      "\t\t\t\t\t\t * here and published whole, with one store: last_error belongs to every thread (see mdb_strerror).",
      "\t\t\t\t\t\t */",
      "\t\t\t\t\t\t{",
      "\t\t\t\t\t\t\tchar message[200];",
      "\t\t\t\t\t\t\tint at = snprintf(message, sizeof message, \"Attempting to write page at position %llu, size %llu, " +
      "blocks %d, buffer sizes\", (unsigned long long) wpos, (unsigned long long) wsize, n);",
      "\t\t\t\t\t\t\tfor (int b = 0; b < n && b < 3 && at >= 0 && at < (int) sizeof message; b++)",
      "\t\t\t\t\t\t\t\tat += snprintf(message + at, sizeof message - at, \" %llu\", (unsigned long long) iov[b].iov_len);",
      "\t\t\t\t\t\t\tsize_t length = strlen(message) + 1;",
      "\t\t\t\t\t\t\tchar *published = malloc(length);",
      "\t\t\t\t\t\t\tif (published) {",
      "\t\t\t\t\t\t\t\tmemcpy(published, message, length);",
      "\t\t\t\t\t\t\t\t__atomic_store_n(&last_error, published, __ATOMIC_RELEASE);",
      "\t\t\t\t\t\t\t}",
      "\t\t\t\t\t\t}",
      ""
    ].join("\n")
  },
  {
    id: "error-message-handoff",
    buggy: "\tint i;\n\tif (!err)\n\t\treturn (\"Successful return: 0\");\n",
    fixed: [
      "\tint i;",
      "\tif (!err)",
      "\t\treturn (\"Successful return: 0\");",
      "\t/* kiln: last_error is one pointer for the whole process: every environment's write thread sets it, and any",
      "\t * thread reporting an error takes it here. Read again below (is there one, copy it, clear it), it could be",
      "\t * taken or replaced by another thread in between: so it is taken once, atomically, into a local that",
      "\t * shadows it for the rest of this function.",
      "\t */",
      "\tchar *taken_error = __atomic_exchange_n(&last_error, NULL, __ATOMIC_ACQ_REL);",
      "\tchar *last_error = taken_error;",
      ""
    ].join("\n")
  }
]
const addon = path.join(lmdbDir, "build/Release/lmdb.node")
/**
 * Written beside the addon once it is built from the fixed source: the source's hash, then the id of every fix, one
 * a line. kiln checks for the ids (lmdbEnvs.ts).
 */
const stamp = path.join(lmdbDir, "build/Release/kiln-lmdb-fixes")

const original = fs.readFileSync(source, "utf8")
let text = original
for (const fix of FIXES) {
  if (text.includes(fix.fixed)) continue
  const buggy = [fix.buggy].flat().find((b) => text.includes(b))
  if (buggy === undefined) {
    fail(`${source} has neither the text fix ${fix.id} replaces nor the fix (another lmdb version?)`)
  }
  text = text.replace(buggy, fix.fixed)
}
if (text !== original) fs.writeFileSync(source, text)
const stampText = [createHash("sha256").update(text).digest("hex"), ...FIXES.map((f) => f.id)].join("\n") + "\n"
if (fs.existsSync(addon) && fs.existsSync(stamp) && fs.readFileSync(stamp, "utf8") === stampText) process.exit(0)

// npm gives its own node-gyp to install scripts; run by hand, take the one beside this Node's npm.
const nodeGyp = process.env.npm_config_node_gyp ??
  path.resolve(path.dirname(process.execPath), "../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js")
if (!fs.existsSync(nodeGyp)) fail(`node-gyp not found at ${nodeGyp}`)
// Node's own headers, when this Node was installed with them (official builds and Debian's are): node-gyp would
// otherwise download them, and only the npm registry may be reachable.
const prefix = path.resolve(path.dirname(process.execPath), "..")
const versionHeader = path.join(prefix, "include/node/node_version.h")
const headersMatch = fs.existsSync(versionHeader) && (() => {
  const h = fs.readFileSync(versionHeader, "utf8")
  const part = (name) => h.match(new RegExp(`#define NODE_${name}_VERSION (\\d+)`))?.[1]
  return `v${part("MAJOR")}.${part("MINOR")}.${part("PATCH")}` === process.version
})()

const t0 = Date.now()
const log = path.join(lmdbDir, "build-kiln.log")
const out = fs.openSync(log, "w")
const build = spawnSync(
  process.execPath,
  [nodeGyp, "rebuild", ...(headersMatch ? [`--nodedir=${prefix}`] : [])],
  { cwd: lmdbDir, stdio: ["ignore", out, out], env: { ...process.env, JOBS: "max" } }
)
fs.closeSync(out)
if (build.status !== 0 || !fs.existsSync(addon)) {
  const tail = fs.readFileSync(log, "utf8").trimEnd().split("\n").slice(-15).join("\n")
  process.stderr.write(`${tail}\n`)
  fail(`node-gyp exited ${build.status ?? build.signal} (a C compiler, make and python3 are needed; log: ${log})`)
}
fs.writeFileSync(stamp, stampText)
say(
  `built lmdb ${version}'s addon with kiln's fixes (${FIXES.map((f) => f.id).join(", ")}) in ` +
    `${((Date.now() - t0) / 1000).toFixed(0)} s`
)
