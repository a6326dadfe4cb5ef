/**
 * The store benchmark (`npm run bench:store`): every kiln figure beside a baseline measured in the same run, as a
 * ratio. Writes `scripts/bench/report.md`. It never fails on a missed target: it reports.
 *
 * `--only=put-small,put-large,tree,startup` runs some sections (for profiling: `node --cpu-prof dist/bench/store.mjs
 * --only=put-small`); the report file is written only when every section ran.
 */
import { Context, Effect, Layer } from "effect"
import { open } from "lmdb"
import { execFileSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type * as Digest from "../../src/domain/Digest.js"
import * as Store from "../../src/layers/Store.js"

// dist/bench/store.mjs → the repository root.
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const cli = path.join(repo, "dist", "cli.js")
const reportFile = path.join(repo, "scripts", "bench", "report.md")

const KiB = 1024
const MiB = 1024 * KiB
const MB = 1e6

const SECTIONS = ["put-small", "put-large", "tree", "startup"] as const
type Section = typeof SECTIONS[number]
const onlyArg = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length)
const selected: ReadonlySet<string> = new Set(onlyArg === undefined ? SECTIONS : onlyArg.split(","))
const runs = (s: Section) => selected.has(s)

// ---------------------------------------------------------------------------------------------------------------
// Measurements

/** Every timed sample, in ms, by name. */
const samples = new Map<string, Array<number>>()
const record = (name: string, ms: number) => {
  const xs = samples.get(name) ?? []
  xs.push(ms)
  samples.set(name, xs)
}
const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}
const summary = (name: string) => {
  const xs = samples.get(name)
  if (xs === undefined || xs.length === 0) throw new Error(`no samples for ${name}`)
  return { median: median(xs), min: Math.min(...xs), n: xs.length }
}

const now = () => performance.now()
const timeSync = <A>(name: string, f: () => A): A => {
  const t0 = now()
  const a = f()
  record(name, now() - t0)
  return a
}
const timeAsync = async <A>(name: string, f: () => Promise<A>): Promise<A> => {
  const t0 = now()
  const a = await f()
  record(name, now() - t0)
  return a
}
const timeEffect = <A, E>(name: string, eff: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    const t0 = now()
    return Effect.tap(eff, () => Effect.sync(() => record(name, now() - t0)))
  })

/**
 * Runs `f` with a store opened on `root` (always a fresh one here), closed (flushed) when `f` is done. Opening and
 * closing are recorded apart; they are not part of any figure in the table.
 */
const withStore = async <A, E>(root: string, f: (store: Store.Service) => Effect.Effect<A, E>): Promise<A> => {
  const t0 = now()
  let t1 = 0
  const a = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const ctx = yield* Layer.build(Store.layer({ root }))
        record("kiln open a fresh store (untimed elsewhere)", now() - t0)
        const a = yield* f(Context.get(ctx, Store.Store))
        t1 = now()
        return a
      })
    )
  )
  record("kiln close a store (untimed elsewhere)", now() - t1)
  return a
}

/** The order of the contenders in rep `i`: rotated, so that no one always runs first (or right after a writer). */
const rotate = <T>(xs: ReadonlyArray<T>, i: number): Array<T> => xs.map((_, j) => xs[(i + j) % xs.length]!)

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`)

// ---------------------------------------------------------------------------------------------------------------
// Temp dirs: one root, removed at the end (and on Ctrl-C).

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-bench-"))
let tmpCounter = 0
const freshDir = (label: string) => path.join(tmpRoot, `${label}-${tmpCounter++}`)
const rm = (p: string) => fs.rmSync(p, { recursive: true, force: true })
const cleanup = () => rm(tmpRoot)
process.once("SIGINT", () => {
  cleanup()
  process.exit(130)
})

// ---------------------------------------------------------------------------------------------------------------
// Put and get of random blobs

interface Blobs {
  readonly label: string
  readonly blobs: ReadonlyArray<Buffer>
  readonly digests: ReadonlyArray<Digest.Digest>
  readonly keys: ReadonlyArray<Buffer>
  readonly bytes: number
  readonly batch: number
  readonly reps: number
}

const makeBlobs = (label: string, count: number, size: number, batch: number, reps: number): Blobs => {
  const blobs = Array.from({ length: count }, () => randomBytes(size))
  const digests = blobs.map((b) => ({ hash: createHash("sha256").update(b).digest("hex"), sizeBytes: b.length }))
  return {
    label,
    blobs,
    digests,
    keys: digests.map((d) => Buffer.from(d.hash, "hex")),
    bytes: count * size,
    batch,
    reps
  }
}

const sha256All = (blobs: ReadonlyArray<Buffer>) => {
  let x = 0
  for (const b of blobs) x ^= createHash("sha256").update(b).digest()[0]!
  return x
}

/** kiln: putFiles in batches into a fresh store, then getFile of every blob. Store open/close is not timed. */
const kilnPutGet = (set: Blobs) =>
  withStore(freshDir(`kiln-${set.label}`), (store) =>
    Effect.gen(function*() {
      yield* timeEffect(
        `kiln put ${set.label}`,
        Effect.gen(function*() {
          for (let i = 0; i < set.blobs.length; i += set.batch) {
            yield* store.putFiles(set.blobs.slice(i, i + set.batch))
          }
        })
      )
      let got = 0
      yield* timeEffect(
        `kiln get ${set.label}`,
        Effect.forEach(set.digests, (d) => Effect.map(store.getFile(d), (b) => (got += b.length)), { discard: true })
      )
      if (got !== set.bytes) throw new Error(`kiln get ${set.label}: read ${got} bytes, expected ${set.bytes}`)
    }))

/**
 * Baseline: one lmdb env opened directly, every value `put` in one turn (one write transaction), timed to the commit
 * (the put promises resolve: what kiln's putFiles waits for too); the wait for `flushed` after that is timed apart.
 */
const rawPutGet = async (set: Blobs) => {
  const dir = freshDir(`lmdb-${set.label}`)
  const db = open<Buffer, Buffer>({
    path: dir,
    mapSize: 16 * 1024 * MiB,
    encoding: "binary",
    keyEncoding: "binary",
    compression: false,
    cache: false
  })
  try {
    await timeAsync(`lmdb put ${set.label}`, () => {
      const pending: Array<Promise<boolean>> = []
      for (let i = 0; i < set.blobs.length; i++) pending.push(db.put(set.keys[i]!, set.blobs[i]!))
      return Promise.all(pending)
    })
    await timeAsync(`lmdb flushed after put ${set.label}`, () => db.flushed)
    let got = 0
    timeSync(`lmdb getBinary ${set.label}`, () => {
      for (const k of set.keys) got += db.getBinary(k)!.length
    })
    if (got !== set.bytes) throw new Error(`lmdb get ${set.label}: read ${got} bytes, expected ${set.bytes}`)
  } finally {
    await db.close()
    rm(dir)
  }
}

/** kiln, informative: every blob in one putFiles call (the batch size sets how many commits a put waits for). */
const kilnPutOneCall = (set: Blobs) =>
  withStore(
    freshDir(`kiln-one-${set.label}`),
    (store) => Effect.asVoid(timeEffect(`kiln put ${set.label} (one call)`, store.putFiles(set.blobs)))
  )

const benchBlobs = async (set: Blobs, oneCall: boolean) => {
  progress(`put/get ${set.label}: ${set.reps} reps`)
  sha256All(set.blobs) // warm-up
  const contenders = oneCall ? ["kiln", "lmdb", "sha", "kiln-one"] as const : ["kiln", "lmdb", "sha"] as const
  for (let i = 0; i < set.reps; i++) {
    for (const which of rotate(contenders, i)) {
      if (which === "kiln") await kilnPutGet(set)
      else if (which === "kiln-one") await kilnPutOneCall(set)
      else if (which === "lmdb") await rawPutGet(set)
      else timeSync(`sha256 ${set.label}`, () => sha256All(set.blobs))
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A 10,000-file tree: snapshot, materialize

interface TreeFile {
  readonly rel: string
  readonly bytes: Buffer
  readonly mode: number
}

interface Tree {
  readonly dirs: ReadonlyArray<string>
  readonly files: ReadonlyArray<TreeFile>
  readonly bytes: number
}

/** A small deterministic PRNG (mulberry32), so that the tree's shape is the same in every run. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const TREE_FILES = 10_000

/**
 * 10,000 files in 1–3 levels of directories (8 names a level, so ~600 directories), sizes log-uniform from 16 B to
 * 64 KiB (below the 512 KiB large-file threshold) plus 1% empty files, 5% executable, random contents.
 */
const makeTree = (): Tree => {
  const rand = prng(42)
  const dirs = new Set<string>()
  const files: Array<TreeFile> = []
  let bytes = 0
  for (let i = 0; i < TREE_FILES; i++) {
    const depth = 1 + Math.floor(rand() * 3)
    const parts: Array<string> = []
    for (let d = 0; d < depth; d++) parts.push(`d${d}${Math.floor(rand() * 8)}`)
    for (let d = 1; d <= parts.length; d++) dirs.add(parts.slice(0, d).join("/"))
    const size = rand() < 0.01 ? 0 : Math.floor(Math.exp(Math.log(16) + rand() * (Math.log(64 * KiB) - Math.log(16))))
    const mode = rand() < 0.05 ? 0o755 : 0o644
    files.push({ rel: `${parts.join("/")}/f${i}.dat`, bytes: randomBytes(size), mode })
    bytes += size
  }
  return { dirs: [...dirs].sort(), files, bytes }
}

const writeTree = (tree: Tree, dest: string) => {
  fs.mkdirSync(dest)
  for (const d of tree.dirs) fs.mkdirSync(path.join(dest, d))
  for (const f of tree.files) fs.writeFileSync(path.join(dest, f.rel), f.bytes, { mode: f.mode })
}

const readHashTree = (dir: string): number => {
  let n = 0
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) n += readHashTree(p)
    else {
      createHash("sha256").update(fs.readFileSync(p)).digest("hex")
      n++
    }
  }
  return n
}

const cpA = (src: string, dst: string) => execFileSync("cp", ["-a", src, dst], { stdio: "ignore" })

const benchTree = async (tree: Tree, reps: number, materializeReps: number) => {
  progress(`tree: ${tree.files.length} files, ${tree.dirs.length} dirs, ${(tree.bytes / MB).toFixed(1)} MB`)
  const src = freshDir("tree-src")
  writeTree(tree, src)
  if (readHashTree(src) !== tree.files.length) throw new Error("the generated tree is incomplete")

  progress(`snapshot vs write vs read+hash: ${reps} reps`)
  let root: Digest.Digest | undefined
  for (let i = 0; i < reps; i++) {
    for (const which of rotate(["snapshot", "write", "hash"] as const, i)) {
      if (which === "snapshot") {
        const storeDir = freshDir("snapshot-store")
        root = await withStore(storeDir, (store) => timeEffect("kiln snapshot tree", store.snapshot(src)))
        rm(storeDir)
      } else if (which === "write") {
        const dest = freshDir("tree-write")
        timeSync("writeFileSync tree", () => writeTree(tree, dest))
        rm(dest)
      } else {
        timeSync("read+sha256 tree", () => readHashTree(src))
      }
    }
  }

  progress(`materialize vs cp -a: ${materializeReps} reps`)
  const storeDir = freshDir("materialize-store")
  await withStore(storeDir, (store) =>
    Effect.gen(function*() {
      const digest = yield* store.snapshot(src)
      if (root !== undefined && digest.hash !== root.hash) throw new Error("the snapshot is not deterministic")
      // Warm-up, untimed: the first walk of the store's directories.
      const warm = freshDir("materialize-warm")
      yield* store.materialize(digest, warm)
      rm(warm)
      for (let i = 0; i < materializeReps; i++) {
        for (const which of rotate(["materialize", "cp"] as const, i)) {
          const dest = freshDir(`tree-${which}`)
          if (which === "materialize") yield* timeEffect("kiln materialize tree", store.materialize(digest, dest))
          else yield* Effect.sync(() => timeSync("cp -a tree", () => cpA(src, dest)))
          const n = readHashTree(dest)
          if (n !== tree.files.length) throw new Error(`${which}: ${n} files, expected ${tree.files.length}`)
          rm(dest)
        }
      }
    }))
  rm(storeDir)
  rm(src)
}

// ---------------------------------------------------------------------------------------------------------------
// Start-up

const STARTUP_RUNS = 21

const benchStartup = () => {
  progress(`start-up: ${STARTUP_RUNS} runs each`)
  const kiln = () => execFileSync(process.execPath, [cli, "--version"], { stdio: "ignore" })
  const bare = () => execFileSync(process.execPath, ["-e", ""], { stdio: "ignore" })
  kiln()
  bare()
  for (let i = 0; i < STARTUP_RUNS; i++) {
    for (const which of rotate(["kiln", "node"] as const, i)) {
      if (which === "kiln") timeSync("kiln --version", kiln)
      else timeSync("node -e \"\"", bare)
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Report

interface Row {
  readonly op: string
  readonly kiln: string
  readonly baseline: string
  readonly ratio: number
  /** `>=` for throughput (higher is better), `<=` for time (lower is better); none: informative. */
  readonly target?: { readonly op: ">=" | "<="; readonly value: number }
}

const mbps = (bytes: number, ms: number) => bytes / MB / (ms / 1000)
const fmtRate = (bytes: number, name: string) => {
  const s = summary(name)
  return `${mbps(bytes, s.median).toFixed(0)} MB/s (best ${mbps(bytes, s.min).toFixed(0)})`
}
const fmtMs = (name: string) => {
  const s = summary(name)
  const f = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1))
  return `${f(s.median)} ms (min ${f(s.min)})`
}
/** kiln throughput over a baseline's: the inverse ratio of their median times over the same bytes. */
const rateRatio = (kiln: string, baseline: string) => summary(baseline).median / summary(kiln).median
const timeRatio = (kiln: string, baseline: string) => summary(kiln).median / summary(baseline).median

const putRows = (set: Blobs, title: string): Array<Row> => {
  const sha = `sha256 ${set.label}`
  const lmdb = `lmdb put ${set.label}`
  const slower = summary(sha).median >= summary(lmdb).median ? sha : lmdb
  const slowerName = slower === sha ? "SHA-256" : "lmdb put"
  // The target compares like with like: the baseline writes every blob in one transaction, so the target row is
  // one putFiles call where the set has one; smaller batches pay one commit (an fdatasync) each and are shown too.
  const oneCall = `kiln put ${set.label} (one call)`
  const headline = samples.has(oneCall) ? oneCall : `kiln put ${set.label}`
  return [
    {
      op: samples.has(oneCall) ? `put ${title} (one putFiles call)` : `put ${title} (putFiles, ${set.batch}/batch)`,
      kiln: fmtRate(set.bytes, headline),
      baseline: `min(SHA-256, lmdb put) = ${slowerName} ${fmtRate(set.bytes, slower)}`,
      ratio: rateRatio(headline, slower),
      target: { op: ">=", value: 0.7 }
    },
    {
      op: `  put ${title} vs SHA-256 alone`,
      kiln: "",
      baseline: fmtRate(set.bytes, sha),
      ratio: rateRatio(headline, sha)
    },
    ...(samples.has(oneCall)
      ? [{
        op: `  put ${title} in batches of ${set.batch} (one commit each), vs lmdb put`,
        kiln: fmtRate(set.bytes, `kiln put ${set.label}`),
        baseline: fmtRate(set.bytes, lmdb),
        ratio: rateRatio(`kiln put ${set.label}`, lmdb)
      }]
      : []),
    {
      op: `get ${title} (getFile, verified)`,
      kiln: fmtRate(set.bytes, `kiln get ${set.label}`),
      baseline: `lmdb getBinary ${fmtRate(set.bytes, `lmdb getBinary ${set.label}`)}`,
      ratio: rateRatio(`kiln get ${set.label}`, `lmdb getBinary ${set.label}`)
    }
  ]
}

const treeRows = (tree: Tree): Array<Row> => [
  {
    op: "snapshot 10,000-file tree (fresh store)",
    kiln: fmtMs("kiln snapshot tree"),
    baseline: `writeFileSync of the files ${fmtMs("writeFileSync tree")}`,
    ratio: timeRatio("kiln snapshot tree", "writeFileSync tree")
  },
  {
    op: "  snapshot vs reading + hashing the files",
    kiln: `${mbps(tree.bytes, summary("kiln snapshot tree").median).toFixed(0)} MB/s`,
    baseline: `read+sha256 ${fmtMs("read+sha256 tree")}`,
    ratio: timeRatio("kiln snapshot tree", "read+sha256 tree")
  },
  {
    op: "materialize 10,000-file tree (fresh dir)",
    kiln: fmtMs("kiln materialize tree"),
    baseline: `cp -a ${fmtMs("cp -a tree")}`,
    ratio: timeRatio("kiln materialize tree", "cp -a tree"),
    target: { op: "<=", value: 1.5 }
  }
]

const startupRows = (): Array<Row> => [{
  op: "start-up `kiln --version`",
  kiln: fmtMs("kiln --version"),
  baseline: `node -e "" ${fmtMs("node -e \"\"")}`,
  ratio: timeRatio("kiln --version", "node -e \"\""),
  target: { op: "<=", value: 2 }
}]

const met = (row: Row) =>
  row.target === undefined
    ? "(info)"
    : (row.target.op === ">=" ? row.ratio >= row.target.value : row.ratio <= row.target.value)
    ? "yes"
    : "**NO**"

const table = (rows: ReadonlyArray<Row>) =>
  [
    "| operation | kiln | baseline | ratio | target | met? |",
    "|---|---|---|---|---|---|",
    ...rows.map((r) =>
      `| ${r.op} | ${r.kiln} | ${r.baseline} | ${r.ratio.toFixed(2)}× | ${
        r.target === undefined ? "" : `${r.target.op === ">=" ? "≥" : "≤"} ${r.target.value}×`
      } | ${met(r)} |`
    )
  ].join("\n")

const rawTable = () =>
  [
    "| measurement | runs | median ms | min ms |",
    "|---|---|---|---|",
    ...[...samples.keys()].map((name) => {
      const s = summary(name)
      return `| ${name} | ${s.n} | ${s.median.toFixed(1)} | ${s.min.toFixed(1)} |`
    })
  ].join("\n")

const sh = (cmd: string, args: ReadonlyArray<string>) => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8" }).trim()
  } catch {
    return "?"
  }
}

const machine = (loadStart: ReadonlyArray<number>, fsType: string) => {
  const la = (xs: ReadonlyArray<number>) => xs.map((x) => x.toFixed(2)).join(" ")
  return [
    `- date: ${new Date().toISOString()}`,
    `- nproc: ${sh("nproc", [])}; CPU: ${os.cpus()[0]?.model ?? "?"} (${os.cpus().length} logical)`,
    `- memory: ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB; kernel: ${os.release()}`,
    `- Node ${process.version}; temp dirs on ${fsType} (${os.tmpdir()})`,
    `- load average (1/5/15 min): ${la(loadStart)} at start, ${la(os.loadavg())} at end`
  ].join("\n")
}

const NOTES = `Notes:
- MB = 10^6 bytes. Each figure is the median of the runs (best run in brackets); ratios are of medians. For
  throughput rows ratio = kiln / baseline (higher is better); for time rows ratio = kiln time / baseline time
  (lower is better). The contenders run interleaved, in rotated order, in every rep.
- put: each rep stores into a fresh temp store (open and close not timed). \`putFiles\` resolves when LMDB has
  committed its transactions; the lmdb baseline is timed the same way: every \`put\` issued in one turn (one write
  transaction) and timed until the put promises resolve (**commit**). The wait for \`db.flushed\` after that is
  timed apart (raw table, "lmdb flushed after put"): it is ~0 ms, because a lone transaction's commit promise here
  resolves only after LMDB's fdatasync, so the baseline is in effect durable. Blobs of 512 KiB and more (the 4 MiB
  ones) go to kiln's large-file folder, one fsynced file each, while the baseline keeps them in LMDB. The baseline
  keys are the precomputed digests; kiln hashes inside the timed call. Batches are sequential; the informative
  "one putFiles call" row stores all 10,000 small blobs in a single call, since each call waits for its own commits.
- get: kiln's \`getFile\` checks every blob's SHA-256; \`getBinary\` only copies it out of LMDB. Warm (just written).
- snapshot: a fresh store each rep; the tree is warm in the page cache. materialize: from one store into a fresh
  directory each rep; \`cp -a\` is spawned with execFileSync and its time includes the spawn.
- start-up: spawned with execFileSync, ${STARTUP_RUNS} runs each after one warm-up.`

// ---------------------------------------------------------------------------------------------------------------

const main = async () => {
  const loadStart = os.loadavg()
  const fsType = sh("df", ["-T", tmpRoot]).split("\n")[1]?.split(/\s+/)[1] ?? "?"
  const t0 = now()
  const rows: Array<Row> = []
  try {
    if (runs("put-small")) {
      const small = makeBlobs("10k×4KiB", 10_000, 4 * KiB, 1_000, 5)
      await benchBlobs(small, true)
      rows.push(...putRows(small, "10,000 × 4 KiB"))
    }
    if (runs("put-large")) {
      const large = makeBlobs("100×4MiB", 100, 4 * MiB, 10, 3)
      await benchBlobs(large, false)
      rows.push(...putRows(large, "100 × 4 MiB"))
    }
    if (runs("tree")) {
      const tree = makeTree()
      // Creating 10,000 files takes seconds on this box: materialize and cp -a get 3 reps.
      await benchTree(tree, 5, 3)
      rows.push(...treeRows(tree))
    }
    if (runs("startup")) {
      if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
      benchStartup()
      rows.push(...startupRows())
    }
  } finally {
    cleanup()
  }
  const report = [
    "# kiln store benchmark",
    "",
    "Generated by `npm run bench:store` (scripts/bench/store.ts). Machine:",
    "",
    machine(loadStart, fsType),
    `- benchmark wall time: ${((now() - t0) / 1000).toFixed(0)} s`,
    "",
    table(rows),
    "",
    NOTES,
    "",
    "## Raw measurements",
    "",
    rawTable(),
    ""
  ].join("\n")
  process.stdout.write(report)
  if (onlyArg === undefined) {
    fs.writeFileSync(reportFile, report)
    progress(`wrote ${path.relative(process.cwd(), reportFile)}`)
  }
}

await main()
