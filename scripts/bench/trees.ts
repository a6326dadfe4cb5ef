/**
 * The tool-trees benchmark (`node dist/bench/trees.mjs [--quick]`, `npm run bench:trees`; issue #22): a workspace
 * whose `node_modules` is a real `npm ci` of pinned packages (scripts/bench/trees/package-lock.json, 10,000+ files),
 * and processes that each run a real tool from it (esbuild bundling a small source tree, `tsc --noEmit` on a small
 * project) with `node_modules/**` among their inputs, as a user writes kiln.json. Beside kiln, in the same run and at
 * the same concurrency: the same commands run bare, and one pass hashing the tree. It never fails on a missed target,
 * nor on a failed kiln run: a failed run is a row that says so.
 *
 * Too slow for `npm run bench` (minutes with today's kiln): run alone, it writes its own section into
 * scripts/bench/report.md, which `npm run bench` keeps.
 *
 * `--sandbox-cost[=REPS]` measures only issue #37's cost figure (scripts/bench/sandboxCost.ts): cold kiln runs of the
 * workspace that declares the tree, kiln's default sandbox (strict) beside `--sandbox off`, interleaved (5 pairs,
 * `--quick` 3), printing "default ÷ off" and the per-process set-up cost; nothing else runs, and report.md is left as
 * it is.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  bareGraph,
  expectRan,
  killLive,
  kilnEnv,
  type KilnRun,
  kilnRun,
  leftovers,
  type Node,
  timedSpawn,
  type Workspace
} from "./kiln.js"
import {
  argValue,
  cli,
  closingNotes,
  emit,
  fmtMs,
  ms,
  now,
  progress,
  quick,
  renderSection,
  repo,
  rm,
  rotate,
  type Row,
  Samples,
  type Section,
  sh,
  type Summary,
  tempRoot,
  times,
  writeOwnSection
} from "./report.js"
import { measureSandboxCost, sandboxCostNotes, sandboxCostReps, sandboxCostRows } from "./sandboxCost.js"

const CONCURRENCY = 2
/** Half esbuild, half tsc. */
const PROCESSES = quick ? 8 : 12
const BARE_REPS = quick ? 3 : 5
const HASH_REPS = quick ? 2 : 3
const NOOP_REPS = quick ? 3 : 5
const EDIT_REPS = quick ? 2 : 3
const MIN_TREE_FILES = 10_000
/** A kiln run that takes longer is ended and reported as failed: a hang must not hang the benchmark. */
const RUN_LIMIT_MS = 20 * 60 * 1000
const PATH = "/usr/bin:/bin"
const NODE = process.execPath

const COLD_TARGET = 1.5
const EDIT_TARGET_MS = 250
const NOOP_TARGET = 1.5
/** The store holds the tree's bytes once, plus LMDB's pages and the small sources and outputs; twice would be 2×. */
const STORE_TARGET = 1.5

const reportFile = path.join(repo, "scripts", "bench", "report.md")
const fixture = path.join(repo, "scripts", "bench", "trees")
const tmp = tempRoot("kiln-bench-trees-", killLive)
const env = kilnEnv(tmp)
const sandboxRoot = path.join(tmp.root, "sandboxes")
const samples = new Samples()
/** What failed, by figure: a line for the table and the end of the log for the notes. */
const failures = new Map<string, { readonly line: string; readonly detail: string }>()

// ---------------------------------------------------------------------------------------------------------------
// The tool tree: a real `npm ci`, cached across runs

/**
 * The cache of the installed tree: `$TMPDIR/kiln-bench-trees-cache/<key>/node_modules`, where the key is the SHA-256
 * of the fixture's package.json and package-lock.json and of the platform and CPU (esbuild's binary is a package of
 * its own for each). Another lock file is another key: the entries of other keys are removed. An entry is complete
 * only once renamed into place, so an interrupted install is never used.
 */
const cacheRoot = path.join(os.tmpdir(), "kiln-bench-trees-cache")

const treeKey = (): string => {
  const h = createHash("sha256")
  for (const f of ["package.json", "package-lock.json"]) h.update(fs.readFileSync(path.join(fixture, f)))
  h.update(`${process.platform} ${process.arch}`)
  return h.digest("hex").slice(0, 16)
}

const countFiles = (dir: string): { readonly files: number; readonly bytes: number } => {
  let files = 0
  let bytes = 0
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue
    files++
    bytes += fs.statSync(path.join(e.parentPath, e.name)).size
  }
  return { files, bytes }
}

interface Tree {
  /** The installed `node_modules`. */
  readonly dir: string
  readonly key: string
  readonly files: number
  readonly bytes: number
  readonly reused: boolean
}

const ensureTree = (): Tree => {
  const key = treeKey()
  const entry = path.join(cacheRoot, key)
  const dir = path.join(entry, "node_modules")
  const reused = fs.existsSync(dir)
  fs.mkdirSync(cacheRoot, { recursive: true })
  for (const other of fs.readdirSync(cacheRoot)) if (other !== key) rm(path.join(cacheRoot, other))
  if (!reused) {
    const staging = path.join(cacheRoot, `${key}.tmp-${process.pid}`)
    fs.mkdirSync(staging)
    for (const f of ["package.json", "package-lock.json"]) {
      fs.copyFileSync(path.join(fixture, f), path.join(staging, f))
    }
    progress(`npm ci of scripts/bench/trees/package-lock.json into ${entry} (kept for the next run)`)
    // No install scripts: esbuild's bin/esbuild stays the JS launcher that `node` runs, as in kiln's own tree.
    execFileSync("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], {
      cwd: staging,
      stdio: ["ignore", "ignore", "inherit"]
    })
    fs.renameSync(staging, entry)
  }
  const { bytes, files } = countFiles(dir)
  if (files < MIN_TREE_FILES) throw new Error(`${dir}: ${files} files, fewer than ${MIN_TREE_FILES}`)
  return { dir, key, files, bytes, reused }
}

// ---------------------------------------------------------------------------------------------------------------
// Workspaces

/** esbuild bundles `pkgs/pN/src/a.ts` (even N); tsc checks the project `pkgs/pN` (odd N). */
const toolOf = (i: number): "esbuild" | "tsc" => (i % 2 === 0 ? "esbuild" : "tsc")

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    noEmit: true,
    target: "ES2022",
    module: "ESNext",
    moduleResolution: "Bundler",
    lib: ["ES2022"],
    types: [],
    skipLibCheck: true
  },
  include: ["src"]
}

/** A module of `n` small typed functions; `salt` (a comment) makes its digest differ between workspaces. */
const moduleText = (name: string, n: number, salt: string): string =>
  [
    `// ${name}: ${salt}`,
    `export interface Item { readonly id: number; readonly label: string }`,
    ...Array.from({ length: n }, (_, k) =>
      `export const ${name}${k} = (xs: ReadonlyArray<Item>): Array<string> =>\n` +
      `  xs.filter((x) => x.id % ${k + 2} === 0).map((x) => \`${name}${k}:\${x.label}\`)`)
  ].join("\n") + "\n"

/** A tsconfig.json only where tsc reads it: esbuild would read one too (its `strict` adds "use strict"), undeclared. */
const writeSources = (pkg: string, salt: string, tool: "esbuild" | "tsc"): void => {
  const src = path.join(pkg, "src")
  fs.mkdirSync(src, { recursive: true })
  fs.writeFileSync(path.join(src, "b.ts"), moduleText("b", 30, salt))
  fs.writeFileSync(path.join(src, "c.ts"), moduleText("c", 30, salt))
  fs.writeFileSync(
    path.join(src, "a.ts"),
    `// a: ${salt}\nimport { b0, type Item } from "./b"\nimport { c1 } from "./c"\n` +
      `const items: Array<Item> = [{ id: 2, label: "two" }, { id: 3, label: "three" }]\n` +
      `export const result: Array<string> = [...b0(items), ...c1(items)]\n`
  )
  if (tool === "tsc") fs.writeFileSync(path.join(pkg, "tsconfig.json"), JSON.stringify(TSCONFIG, null, 1))
}

interface TreeWorkspace extends Workspace {
  /** Whether `node_modules/**` is among the inputs (and the tree is copied into the workspace). */
  readonly declared: boolean
}

/**
 * Writes a workspace of {@link PROCESSES} packages into `dir`. With `declared`, the tree is copied in (`cp -a`, a real
 * directory as `npm ci` leaves it) and every process declares `node_modules/**` and runs its tool from there; without,
 * the tools run from the cached tree by absolute path, outside the workspace and not among the inputs (declared as a
 * host path instead, which the strict sandbox shows read-only at its own path), and the inputs are the package's own
 * files only.
 */
const writeWorkspace = (dir: string, o: { readonly tree: Tree; readonly salt: string; readonly declared: boolean }) => {
  fs.mkdirSync(dir, { recursive: true })
  if (o.declared) execFileSync("cp", ["-a", o.tree.dir, path.join(dir, "node_modules")])
  const toolRoot = o.declared ? "node_modules" : o.tree.dir
  const nodes: Array<Node> = []
  const processes: Record<string, unknown> = {}
  for (let i = 0; i < PROCESSES; i++) {
    const name = `p${i}`
    const pkg = `pkgs/${name}`
    const tool = toolOf(i)
    writeSources(path.join(dir, pkg), o.salt, tool)
    const argv = tool === "esbuild"
      ? [NODE, `${toolRoot}/esbuild/bin/esbuild`, "--bundle", `${pkg}/src/a.ts`, `--outfile=${pkg}/out/a.js`]
      : [NODE, `${toolRoot}/typescript/bin/tsc`, "--noEmit", "-p", pkg]
    const own = tool === "esbuild" ? [`${pkg}/src/**`] : [`${pkg}/tsconfig.json`, `${pkg}/src/**`]
    nodes.push({ name, deps: [], argv })
    processes[name] = {
      argv,
      inputs: o.declared ? [...own, "node_modules/**"] : own,
      ...(o.declared ? {} : { hostPaths: [o.tree.dir] }),
      ...(tool === "esbuild" ? { outputs: [`${pkg}/out/a.js`] } : {}),
      env: { PATH }
    }
  }
  const config = path.join(dir, "kiln.json")
  fs.writeFileSync(config, JSON.stringify({ processes }, null, 1))
  // The process an edit re-runs: p0, an esbuild bundle, whose c.ts nothing else reads.
  const leaf = nodes[0]!
  return {
    dir,
    config,
    shape: "wide",
    nodes,
    leaf,
    leafFile: path.join(dir, "pkgs", leaf.name, "src", "c.ts"),
    declared: o.declared
  } satisfies TreeWorkspace
}

// ---------------------------------------------------------------------------------------------------------------
// Runs

const firstLine = (e: unknown): string => {
  const text = e instanceof Error ? e.message : String(e)
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l !== "")
  return lines.find((l) => l.startsWith("kiln:")) ?? lines[lines.length - 1] ?? text
}

/**
 * `kiln run` of `ws` on `store`, checked to have run `ran` processes, its time recorded under `name`; a failed run
 * (an exit code, a wrong summary, longer than {@link RUN_LIMIT_MS}) is recorded in {@link failures} instead.
 */
const kiln = async (name: string, ws: TreeWorkspace, store: string, ran: number): Promise<KilnRun | undefined> => {
  // Only one child runs at a time here: ending every live one ends this run.
  const limit = setTimeout(killLive, RUN_LIMIT_MS)
  try {
    const r = await kilnRun(tmp, env, {
      ws,
      store,
      concurrency: CONCURRENCY,
      args: ["--sandbox-root", sandboxRoot],
      bin: true
    })
    expectRan(name, r, ws.nodes.length, ran)
    samples.record(name, r.ms)
    samples.record(`${name}: engine (--summary wallMs)`, r.summary.wallMs)
    return r
  } catch (e) {
    const line = firstLine(e)
    progress(`${name}: FAILED: ${line}`)
    failures.set(name, { line, detail: e instanceof Error ? e.message : String(e) })
    return undefined
  } finally {
    clearTimeout(limit)
  }
}

const hashPass = async (ws: TreeWorkspace): Promise<void> => {
  const r = await timedSpawn(["/bin/sh", "-c", `cd '${ws.dir}' && ${HASH}`], { env: { PATH }, log: "/dev/null" })
  if (r.code !== 0) throw new Error(`the hashing pass in ${ws.dir} exited with ${r.code ?? r.signal}`)
  samples.record(HASH, r.ms)
}

/** `du` of a directory in bytes of disk used. */
const du = (dir: string): number => Number(sh("du", ["-s", "--block-size=1", dir]).split(/\s+/)[0])
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`

const BARE = `bare: the ${PROCESSES} commands, ${CONCURRENCY} in flight`
const BARE_ONE = "bare: the edited process's command alone"
const HASH = "find node_modules -type f | xargs sha256sum"
const COLD = "kiln cold (fresh store)"
const COLD2 = "kiln second cold (fresh workspace copy, same store)"
const EDIT = "kiln one source file edited"
const NOOP = "kiln no-op, node_modules/** declared"
const NOOP_BARE = "kiln no-op, tools by absolute path, node_modules undeclared"
const COLD_UNDECLARED = "kiln cold, node_modules undeclared (fresh store)"

const sizes = new Map<string, number>()

const baselines = async (bare: TreeWorkspace) => {
  const one: Workspace = { ...bare, nodes: [bare.leaf] }
  progress(`baselines: ${BARE_REPS} × the ${PROCESSES} commands bare, ${BARE_REPS} × one, ${HASH_REPS} hashing passes`)
  for (let i = 0; i < BARE_REPS; i++) {
    for (const which of rotate(["all", "one", "hash"] as const, i)) {
      if (which === "all") samples.record(BARE, await bareGraph(bare, CONCURRENCY))
      else if (which === "one") samples.record(BARE_ONE, await bareGraph(one, 1))
      else if (i < HASH_REPS) await hashPass(bare)
    }
  }
}

const colds = async (a: TreeWorkspace, b: TreeWorkspace, store: string) => {
  progress(`${COLD}: ${PROCESSES} processes over the tree (minutes with today's kiln)`)
  const cold = await kiln(COLD, a, store, PROCESSES)
  sizes.set("store after the cold run", du(store))
  progress(COLD2)
  await kiln(COLD2, b, store, PROCESSES)
  sizes.set("store after the second cold run", du(store))
  return cold !== undefined
}

const steadyState = async (a: TreeWorkspace, v: TreeWorkspace, store: string, vStore: string, coldOk: boolean) => {
  progress(`${COLD_UNDECLARED}, then untimed warm-up no-ops`)
  const vOk = (await kiln(COLD_UNDECLARED, v, vStore, PROCESSES)) !== undefined
  if (vOk) await kiln("warm-up no-op, undeclared", v, vStore, 0)
  if (coldOk) await kiln("warm-up no-op, declared", a, store, 0)
  let edits = 0
  progress(`${NOOP_REPS} no-ops of each workspace, ${EDIT_REPS} runs with one source file edited`)
  for (let i = 0; i < Math.max(NOOP_REPS, EDIT_REPS); i++) {
    for (const which of rotate(["noop", "undeclared", "edit"] as const, i)) {
      if (which === "noop" && coldOk && i < NOOP_REPS) await kiln(NOOP, a, store, 0)
      else if (which === "undeclared" && vOk && i < NOOP_REPS) await kiln(NOOP_BARE, v, vStore, 0)
      else if (which === "edit" && coldOk && i < EDIT_REPS) {
        fs.appendFileSync(a.leafFile, `// edit ${++edits}\n`)
        await kiln(EDIT, a, store, 1)
      }
    }
  }
}

/** The first line where two texts differ, for the note that says they do. */
const firstDifference = (a: string, b: string): string => {
  const [la, lb] = [a.split("\n"), b.split("\n")]
  const i = la.findIndex((l, k) => l !== lb[k])
  const at = i < 0 ? la.length : i
  return `line ${at + 1}: ${JSON.stringify(la[at] ?? "")} against ${JSON.stringify(lb[at] ?? "")}`
}

/** kiln and the bare commands, on the same sources, bundled the same bytes (every esbuild output but p0's, edited). */
const compareOutputs = (a: TreeWorkspace, bare: TreeWorkspace): string => {
  const files = a.nodes.filter((n, i) => i > 0 && toolOf(i) === "esbuild").map((n) =>
    path.join("pkgs", n.name, "out", "a.js")
  )
  const differ: Array<string> = []
  for (const file of files) {
    try {
      const [k, b] = [path.join(a.dir, file), path.join(bare.dir, file)].map((f) => fs.readFileSync(f, "utf8"))
      if (k !== b) differ.push(`${file} (${firstDifference(k!, b!)})`)
    } catch (e) {
      differ.push(`${file} (${firstLine(e)})`)
    }
  }
  return differ.length === 0
    ? `kiln and the bare run wrote the same ${files.join(", ")}`
    : `**kiln's outputs differ from the bare run's**: ${differ.join("; ")}`
}

// ---------------------------------------------------------------------------------------------------------------
// Rows

const summaryOf = (name: string): Summary | undefined => samples.has(name) ? samples.summary(name) : undefined

const failedRow = (figure: string, name: string, baseline: string, target: Row["target"]): Row => ({
  figure,
  value: `FAILED: ${failures.get(name)?.line ?? "not run (an earlier run failed)"}`,
  baseline,
  ratio: "",
  ...(target !== undefined ? { target: { ...target, actual: Number.POSITIVE_INFINITY } } : {})
})

const ratioRow = (
  figure: string,
  name: string,
  base: { readonly text: string; readonly ms: number },
  target: number
): Row => {
  const s = summaryOf(name)
  const t = { op: "<=", value: target, actual: 0, unit: "×" } as const
  if (s === undefined) return failedRow(figure, name, base.text, t)
  return {
    figure,
    value: fmtMs(s),
    baseline: base.text,
    ratio: times(s.median / base.ms),
    target: { ...t, actual: s.median / base.ms }
  }
}

const rows = (tree: Tree): Array<Row> => {
  const bare = samples.summary(BARE)
  const one = samples.summary(BARE_ONE)
  const hash = samples.summary(HASH)
  const out: Array<Row> = [
    ratioRow(`cold \`kiln run\`, ${PROCESSES} processes (fresh store), ${CONCURRENCY} in flight`, COLD, {
      text: `bare ${ms(bare.median)} + hashing ${ms(hash.median)} = ${ms(bare.median + hash.median)} ms`,
      ms: bare.median + hash.median
    }, COLD_TARGET),
    ratioRow(`second cold run: a fresh copy of the workspace (new sources, same tree), same store`, COLD2, {
      text: `bare ${fmtMs(bare)}`,
      ms: bare.median
    }, COLD_TARGET)
  ]
  const edit = summaryOf(EDIT)
  const editTarget = { op: "<=", value: EDIT_TARGET_MS, actual: 0, unit: "ms" } as const
  out.push(
    edit === undefined
      ? failedRow("one source file edited (1 process runs)", EDIT, `one bare command ${fmtMs(one)}`, editTarget)
      : {
        figure: "one source file edited (1 process runs): the run − one bare command",
        value: `${fmtMs(edit)}: +${ms(edit.median - one.median)} ms over the bare command`,
        baseline: `one bare command ${fmtMs(one)}`,
        ratio: times(edit.median / one.median),
        target: { ...editTarget, actual: edit.median - one.median }
      }
  )
  const noopBare = summaryOf(NOOP_BARE)
  out.push(
    noopBare === undefined
      ? failedRow("no-op, `node_modules/**` declared", NOOP_BARE, "no-op undeclared: failed", {
        op: "<=",
        value: NOOP_TARGET,
        actual: 0,
        unit: "×"
      })
      : ratioRow("no-op, `node_modules/**` declared", NOOP, {
        text: `no-op, tree undeclared ${fmtMs(noopBare)}`,
        ms: noopBare.median
      }, NOOP_TARGET)
  )
  const treeDu = du(tree.dir)
  for (const [what, bytes] of sizes) {
    out.push({
      figure: `${what} (du), ${PROCESSES} processes sharing the tree`,
      value: mb(bytes),
      baseline: `node_modules ${mb(treeDu)} (du)`,
      ratio: times(bytes / treeDu),
      target: { op: "<=", value: STORE_TARGET, actual: bytes / treeDu, unit: "×" }
    })
  }
  out.push(
    { figure: `  baseline: ${BARE}`, value: "", baseline: fmtMs(bare), ratio: "" },
    { figure: `  baseline: one pass hashing the tree, \`${HASH}\``, value: "", baseline: fmtMs(hash), ratio: "" }
  )
  return out
}

// ---------------------------------------------------------------------------------------------------------------
// The section

const notes = (tree: Tree, compared: string): string => {
  const failed = [...failures].map(([name, f]) =>
    [`- ${name}:`, "", "```", f.detail.split("\n").slice(-12).join("\n"), "```"].join("\n")
  )
  return [
    `Notes:`,
    `- The tree: \`npm ci --prefer-offline --no-audit --no-fund --ignore-scripts\` of scripts/bench/trees/` +
    `package-lock.json (esbuild, typescript, effect and @effect/*, lodash, rxjs: pinned), ${
      tree.files.toLocaleString("en-US")
    } files, ${mb(tree.bytes)}; cached in \`${cacheRoot}/<key>\` (key ${tree.key}: the SHA-256 of the fixture's` +
    ` package.json, package-lock.json, platform and CPU; another key's entry is removed), ${
      tree.reused ? "reused from an earlier run" : "installed by this run"
    }. Each workspace that declares it gets its own copy (\`cp -a\`, untimed).`,
    `- ${PROCESSES} processes, half \`node node_modules/esbuild/bin/esbuild --bundle pkgs/pN/src/a.ts` +
    ` --outfile=pkgs/pN/out/a.js\` (inputs \`pkgs/pN/src/**\`, \`node_modules/**\`), half \`node` +
    ` node_modules/typescript/bin/tsc --noEmit -p pkgs/pN\` (inputs \`pkgs/pN/tsconfig.json\`, \`pkgs/pN/src/**\`,` +
    ` \`node_modules/**\`), env PATH only, ${CONCURRENCY} in flight, \`--sandbox-root\` and \`--store-dir\` under the` +
    ` benchmark's temp dir (${sh("df", ["-T", tmp.root]).split("\n")[1]?.split(/\s+/)[1] ?? "?"}).`,
    `- kiln is started as a user's \`kiln\` is, the package's bin (\`dist/kiln\`, the native client): a run goes to` +
    ` the standby engine the run before it left (each run waits, untimed, for the standby it leaves to listen, as a` +
    ` user's next command comes after it), so no run but the first pays Node's start or the engine's loading.`,
    `- Baselines in the same run: the same commands in a copy of the workspace, spawned bare at the same concurrency` +
    ` (${BARE_REPS} reps); the edited process's command alone; \`${HASH}\` in that copy (${HASH_REPS} reps, page` +
    ` cache warm). ${compared}.`,
    `- cold: one run on a fresh store. Second cold: a second workspace with the same tree and new sources (a` +
    ` different comment in each file, so every process runs again) on the same store: the tree is in the store` +
    ` already. Edit: a line appended to pkgs/p0/src/c.ts (only p0 reads it) before each of ${EDIT_REPS} runs.` +
    ` No-op: ${NOOP_REPS} runs of each workspace after an untimed warm-up, interleaved; the baseline is the same` +
    ` workspace without \`node_modules\`, its tools run by the absolute path of the cached tree, declared as a host path, not an input.`,
    `- Store size: \`du\` of the store against \`du\` of the tree (one copy), after the cold run and after the` +
    ` second, whose ${PROCESSES} processes use the same tree.`,
    `- Targets (issue #22): cold ≤ ${COLD_TARGET}× (bare + one hashing pass); second cold ≤ ${COLD_TARGET}× bare;` +
    ` edit ≤ one bare command + ${EDIT_TARGET_MS} ms; no-op ≤ ${NOOP_TARGET}× the undeclared no-op; the store ≤` +
    ` ${STORE_TARGET}× the tree. A failed kiln run is a row that says FAILED, its target missed.`,
    ...(failed.length > 0 ? ["", "The failed runs (the end of their output):", "", ...failed] : [])
  ].join("\n")
}

const revision = (): string => {
  const commit = sh("git", ["-C", repo, "log", "-1", "--format=%h %s"])
  const dirty = sh("git", ["-C", repo, "status", "--porcelain", "--", "src"]) !== ""
  return `- kiln: commit ${commit}${dirty ? " **with uncommitted changes in src/**" : ""}`
}

/** `--sandbox-cost`: how many pairs of cold runs, if that comparison alone is asked for. */
const costReps = sandboxCostReps(quick ? 3 : 5)

/** `--sandbox-cost`: the declared workspace's cold runs, default sandbox beside `--sandbox off`; printed only. */
const sandboxCostMain = async (reps: number) => {
  const loadStart = os.loadavg()
  const t0 = now()
  let section: Section | undefined
  try {
    const tree = ensureTree()
    progress(`the tree: ${tree.files} files, ${mb(tree.bytes)}; writing a workspace with a copy of it`)
    const a = writeWorkspace(tmp.fresh("ws-a"), { tree, salt: "workspace a", declared: true })
    const cost = await measureSandboxCost({
      tmp,
      env,
      samples,
      label: `${PROCESSES} tool processes over the tree`,
      config: a.config,
      processes: PROCESSES,
      concurrency: CONCURRENCY,
      reps,
      args: ["--sandbox-root", sandboxRoot],
      clean: () => {
        for (const n of a.nodes) rm(path.join(a.dir, "pkgs", n.name, "out"))
      },
      limitMs: RUN_LIMIT_MS
    })
    const left = await leftovers(tmp)
    const wallSeconds = (now() - t0) / 1000
    section = {
      name: "trees",
      title: "Strict sandbox cost on the tool-trees workload (`npm run bench:trees -- --sandbox-cost`)",
      quick,
      wallSeconds,
      loadStart,
      loadEnd: os.loadavg(),
      rows: sandboxCostRows(samples, cost),
      body: [
        sandboxCostNotes({
          what: `The tool-trees workspace that declares the tree: ${PROCESSES} processes, half esbuild bundles, half` +
            ` \`tsc --noEmit\`, each with \`node_modules/**\` (${tree.files.toLocaleString("en-US")} files, ${
              mb(tree.bytes)
            }) among its inputs, ${CONCURRENCY} in flight, \`--sandbox-root\` under the benchmark's temp dir. A cold` +
            " run on a fresh store stores the tree too: a cost both contenders pay."
        }),
        closingNotes({ left, kiln: revision(), loadStart, tempDir: tmp.root, wallSeconds, samples })
      ].join("\n")
    }
  } finally {
    if (section === undefined) await leftovers(tmp)
    tmp.cleanup()
  }
  emit(section, path.dirname(tmp.root))
}

const main = async () => {
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`)
  if (costReps !== undefined) return sandboxCostMain(costReps)
  const loadStart = os.loadavg()
  const t0 = now()
  let section: Section | undefined
  let left = { processes: 0, sandboxes: 0 }
  try {
    const tree = ensureTree()
    progress(`the tree: ${tree.files} files, ${mb(tree.bytes)}; writing 4 workspaces (3 copies of it)`)
    const a = writeWorkspace(tmp.fresh("ws-a"), { tree, salt: "workspace a", declared: true })
    const bare = writeWorkspace(tmp.fresh("ws-bare"), { tree, salt: "workspace a", declared: true })
    const b = writeWorkspace(tmp.fresh("ws-b"), { tree, salt: "workspace b", declared: true })
    const v = writeWorkspace(tmp.fresh("ws-undeclared"), { tree, salt: "workspace a", declared: false })
    await baselines(bare)
    const store = tmp.fresh("store")
    const coldOk = await colds(a, b, store)
    await steadyState(a, v, store, tmp.fresh("store-undeclared"), coldOk)
    const compared = coldOk ? compareOutputs(a, bare) : "The outputs were not compared: the cold run failed"
    left = await leftovers(tmp)
    section = {
      name: "trees",
      title: "Tool trees: a real node_modules as every process's input",
      quick,
      wallSeconds: (now() - t0) / 1000,
      loadStart,
      loadEnd: os.loadavg(),
      rows: rows(tree),
      body: [
        notes(tree, compared),
        closingNotes({
          left,
          kiln: revision(),
          loadStart,
          tempDir: tmp.root,
          wallSeconds: (now() - t0) / 1000,
          samples,
          alone: true
        })
      ].join("\n")
    }
  } finally {
    if (section === undefined) await leftovers(tmp)
    tmp.cleanup()
  }
  emit(section, path.dirname(tmp.root))
  if (argValue("section-json") === undefined) {
    writeOwnSection(reportFile, "trees", renderSection(section, "##"))
    progress(`wrote its section into ${path.relative(process.cwd(), reportFile)}`)
  }
}

await main()
