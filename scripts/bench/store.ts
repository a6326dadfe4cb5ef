/**
 * The store benchmark (`npm run bench:store`, part of `npm run bench`): every kiln figure beside a baseline measured
 * in the same run, as a ratio. Run alone, it prints its report; `--quick` runs smaller sets and fewer reps. It never
 * fails on a missed target: it reports.
 *
 * `--only=put-small,put-large,tree,startup` runs some sections (for profiling: `node --cpu-prof dist/bench/store.mjs
 * --only=put-small`).
 */
import { Context, Effect, Layer } from "effect"
import { open } from "lmdb"
import { execFileSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Digest from "../../src/domain/Digest.js"
import * as Store from "../../src/layers/store/Store.js"
import {
  argValue,
  cli,
  emit,
  fmtMs as fmtSummary,
  now,
  progress,
  quick,
  rawTable,
  rm,
  rotate,
  type Row,
  Samples,
  tempRoot,
  timeEffect as timeEffectIn,
  times
} from "./report.js"

const KiB = 1024
const MiB = 1024 * KiB
const MB = 1e6

const SECTIONS = ["put-small", "put-large", "tree", "startup"] as const
type Section = typeof SECTIONS[number]
const onlyArg = argValue("only")
const selected: ReadonlySet<string> = new Set(onlyArg === undefined ? SECTIONS : onlyArg.split(","))
const runs = (s: Section) => selected.has(s)

// ---------------------------------------------------------------------------------------------------------------
// Measurements

const samples = new Samples()
const record = (name: string, ms: number) => samples.record(name, ms)
const summary = (name: string) => samples.summary(name)
const timeSync = <A>(name: string, f: () => A): A => samples.timeSync(name, f)
const timeAsync = <A>(name: string, f: () => Promise<A>): Promise<A> => samples.timeAsync(name, f)
const timeEffect = <A, E>(name: string, eff: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  timeEffectIn(samples, name, eff)

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

const tmp = tempRoot("kiln-bench-store-")
const freshDir = tmp.fresh

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
// A 10,000-file tree (2,000 with --quick): snapshot, materialize

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

const TREE_FILES = quick ? 2_000 : 10_000
const treeLabel = `${TREE_FILES.toLocaleString("en-US")}-file tree`

/**
 * 10,000 files (2,000 with --quick) in 1–3 levels of directories (8 names a level, so ~600 directories), sizes
 * log-uniform from 16 B to 64 KiB (below the 512 KiB large-file threshold) plus 1% empty files, 5% executable, random
 * contents.
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

const STARTUP_RUNS = quick ? 11 : 21

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

const mbps = (bytes: number, ms: number) => bytes / MB / (ms / 1000)
const fmtRate = (bytes: number, name: string) => {
  const s = summary(name)
  return `${mbps(bytes, s.median).toFixed(0)} MB/s (best ${mbps(bytes, s.min).toFixed(0)})`
}
const fmtMs = (name: string) => fmtSummary(summary(name))
/** kiln throughput over a baseline's: the inverse ratio of their median times over the same bytes. */
const rateRatio = (kiln: string, baseline: string) => summary(baseline).median / summary(kiln).median
const timeRatio = (kiln: string, baseline: string) => summary(kiln).median / summary(baseline).median
/** A ratio cell, and the target row's target: `actual` is the ratio. */
const ratioRow = (ratio: number, target?: { readonly op: "<=" | ">="; readonly value: number }) => ({
  ratio: times(ratio),
  ...(target !== undefined ? { target: { ...target, actual: ratio, unit: "×" as const } } : {})
})

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
      figure: samples.has(oneCall) ? `put ${title} (one putFiles call)` : `put ${title} (putFiles, ${set.batch}/batch)`,
      value: fmtRate(set.bytes, headline),
      baseline: `min(SHA-256, lmdb put) = ${slowerName} ${fmtRate(set.bytes, slower)}`,
      ...ratioRow(rateRatio(headline, slower), { op: ">=", value: 0.7 })
    },
    {
      figure: `  put ${title} vs SHA-256 alone`,
      value: "",
      baseline: fmtRate(set.bytes, sha),
      ...ratioRow(rateRatio(headline, sha))
    },
    ...(samples.has(oneCall)
      ? [{
        figure: `  put ${title} in batches of ${set.batch} (one commit each), vs lmdb put`,
        value: fmtRate(set.bytes, `kiln put ${set.label}`),
        baseline: fmtRate(set.bytes, lmdb),
        ...ratioRow(rateRatio(`kiln put ${set.label}`, lmdb))
      }]
      : []),
    {
      figure: `get ${title} (getFile, verified)`,
      value: fmtRate(set.bytes, `kiln get ${set.label}`),
      baseline: `lmdb getBinary ${fmtRate(set.bytes, `lmdb getBinary ${set.label}`)}`,
      ...ratioRow(rateRatio(`kiln get ${set.label}`, `lmdb getBinary ${set.label}`))
    }
  ]
}

const treeRows = (tree: Tree): Array<Row> => [
  {
    figure: `snapshot ${treeLabel} (fresh store)`,
    value: fmtMs("kiln snapshot tree"),
    baseline: `writeFileSync of the files ${fmtMs("writeFileSync tree")}`,
    ...ratioRow(timeRatio("kiln snapshot tree", "writeFileSync tree"))
  },
  {
    figure: "  snapshot vs reading + hashing the files",
    value: `${mbps(tree.bytes, summary("kiln snapshot tree").median).toFixed(0)} MB/s`,
    baseline: `read+sha256 ${fmtMs("read+sha256 tree")}`,
    ...ratioRow(timeRatio("kiln snapshot tree", "read+sha256 tree"))
  },
  {
    figure: `materialize ${treeLabel} (fresh dir)`,
    value: fmtMs("kiln materialize tree"),
    baseline: `cp -a ${fmtMs("cp -a tree")}`,
    ...ratioRow(timeRatio("kiln materialize tree", "cp -a tree"), { op: "<=", value: 1.5 })
  }
]

const startupRows = (): Array<Row> => [{
  figure: "start-up `kiln --version`",
  value: fmtMs("kiln --version"),
  baseline: `node -e "" ${fmtMs("node -e \"\"")}`,
  ...ratioRow(timeRatio("kiln --version", "node -e \"\""), { op: "<=", value: 2 })
}]

const SMALL = quick ? { count: 2_000, batch: 1_000, reps: 3 } : { count: 10_000, batch: 1_000, reps: 5 }
const LARGE = quick ? { count: 20, batch: 10, reps: 2 } : { count: 100, batch: 10, reps: 3 }
// Creating 10,000 files takes seconds on this box: materialize and cp -a get 3 reps.
const TREE_REPS = quick ? { snapshot: 3, materialize: 2 } : { snapshot: 5, materialize: 3 }

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
  "one putFiles call" row stores all the small blobs in a single call, since each call waits for its own commits.
- get: kiln's \`getFile\` checks every blob's SHA-256; \`getBinary\` only copies it out of LMDB. Warm (just written).
- snapshot: a fresh store each rep; the tree is warm in the page cache. materialize: from one store into a fresh
  directory each rep; \`cp -a\` is spawned with execFileSync and its time includes the spawn.
- start-up: spawned with execFileSync, ${STARTUP_RUNS} runs each after one warm-up.
- Sizes: ${
  SMALL.count.toLocaleString("en-US")
} × 4 KiB in batches of ${SMALL.batch} (${SMALL.reps} reps), ${LARGE.count} × 4 MiB in
  batches of ${LARGE.batch} (${LARGE.reps} reps), a ${treeLabel} (snapshot ${TREE_REPS.snapshot} reps, materialize
  ${TREE_REPS.materialize}).`

// ---------------------------------------------------------------------------------------------------------------

const main = async () => {
  const loadStart = os.loadavg()
  const t0 = now()
  const rows: Array<Row> = []
  try {
    if (runs("put-small")) {
      const small = makeBlobs(`${SMALL.count / 1000}k×4KiB`, SMALL.count, 4 * KiB, SMALL.batch, SMALL.reps)
      await benchBlobs(small, true)
      rows.push(...putRows(small, `${SMALL.count.toLocaleString("en-US")} × 4 KiB`))
    }
    if (runs("put-large")) {
      const large = makeBlobs(`${LARGE.count}×4MiB`, LARGE.count, 4 * MiB, LARGE.batch, LARGE.reps)
      await benchBlobs(large, false)
      rows.push(...putRows(large, `${LARGE.count} × 4 MiB`))
    }
    if (runs("tree")) {
      const tree = makeTree()
      await benchTree(tree, TREE_REPS.snapshot, TREE_REPS.materialize)
      rows.push(...treeRows(tree))
    }
    if (runs("startup")) {
      if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
      benchStartup()
      rows.push(...startupRows())
    }
  } finally {
    tmp.cleanup()
  }
  emit({
    name: "store",
    title: "Store: put, get, snapshot, materialize, start-up",
    quick,
    wallSeconds: (now() - t0) / 1000,
    loadStart,
    loadEnd: os.loadavg(),
    rows,
    body: [NOTES, "", "Raw measurements:", "", rawTable(samples)].join("\n")
  }, path.dirname(tmp.root))
}

await main()
