/**
 * No request leaves the engine waiting: the spawner (native and Node alike) answers every line it reads, a line it
 * cannot use by its number (`rejected`), since its id may be what is wrong. The engine fails the request it wrote on
 * that line, and takes a refusal of a line that holds no waiting request for a spawner gone wrong. A run waiting on
 * a spawner that stopped reading can still be interrupted, and what that spawner starts afterwards is killed.
 *
 * The spawner used to drop a request it could not parse (a NUL in `env`, from kiln.json) and never answer it: kiln
 * waited for good, deaf to SIGTERM and the first Ctrl-C (the wait was uninterruptible).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, FastCheck as fc, Fiber, Scope } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { SpawnError } from "../../src/domain/Process.js"
import * as ProcessGroup from "../../src/layers/runner/internal/processGroup.js"
import * as Protocol from "../../src/layers/spawner/Protocol.js"
import * as Spawner from "../../src/layers/spawner/Spawner.js"
import { eventually, helpersOf } from "../utils/child.js"
import { programs, withProgram } from "../utils/spawners.js"
import { tempDir } from "../utils/temp.js"

/** One line to feed the spawner, and the id a reply to it carries when the spawner can read it (else its number). */
interface Line {
  readonly bytes: Buffer
  readonly id?: number
}

const NEWLINE = 0x0a

/** Arbitrary text or bytes, on one line. */
const junk: fc.Arbitrary<Line> = fc.oneof(
  fc.string({ maxLength: 80 }).map((s) => ({ bytes: Buffer.from(s.replaceAll("\n", " ")) })),
  fc.fullUnicodeString({ maxLength: 40 }).map((s) => ({ bytes: Buffer.from(s.replaceAll("\n", " ")) })),
  fc.uint8Array({ maxLength: 80 }).map((b) => ({ bytes: Buffer.from(b.filter((c) => c !== NEWLINE)) })),
  fc.jsonValue({ maxDepth: 2 }).map((v) => ({ bytes: Buffer.from(JSON.stringify(v) ?? "null") }))
)

/**
 * A spawn or remove request (of `/bin/true`, within `dir`) broken one way: a field replaced by a value of another
 * type, a NUL in one of its strings, cut short, or raw bytes inserted. Never a string where a path or program was,
 * nor a new field: whatever the spawner makes of a broken line stays within `dir`.
 */
const broken = (dir: string, id: number): fc.Arbitrary<Line> => {
  const spawnRequest: Record<string, unknown> = {
    kind: "spawn",
    id,
    argv: ["/bin/true", "a"],
    cwd: dir,
    env: { A: "x" },
    stdout: path.join(dir, `out-${id}`),
    stderr: path.join(dir, `err-${id}`)
  }
  const removeRequest: Record<string, unknown> = { kind: "remove", id, paths: [path.join(dir, `gone-${id}`)] }
  const notString = fc.jsonValue({ maxDepth: 2 }).filter((v) =>
    typeof v !== "string" && !(Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "string"))
  )
  const withNul: Record<string, (r: Record<string, unknown>, s: string) => void> = {
    argv: (r, s) => void (r.argv = ["/bin/true", s]),
    env: (r, s) => void (r.env = { A: s }),
    envName: (r, s) => void (r.env = { [s]: "x" }),
    cwd: (r, s) => void (r.cwd = `${dir}/${s}`),
    stdout: (r, s) => void (r.stdout = `${dir}/${s}`)
  }
  const text = (r: Record<string, unknown>) => JSON.stringify(r)
  /** The id a reply may carry once `field` is `v`: another valid id is still an id, another kind has none. */
  const idAfter = (field: string, v: unknown): { id?: number } =>
    field === "kind"
      ? {}
      : field !== "id"
      ? { id }
      : Number.isSafeInteger(v) && (v as number) >= 0
      ? { id: v as number }
      : {}
  return fc.oneof(
    // A field of the wrong type (the id's too: then only its line names it).
    fc.tuple(fc.constantFrom("kind", "id", "argv", "cwd", "env", "stdout", "stderr"), notString).map(([field, v]) => ({
      bytes: Buffer.from(text({ ...spawnRequest, [field]: v })),
      ...idAfter(field, v)
    })),
    fc.tuple(fc.constantFrom("kind", "id", "paths"), notString).map(([field, v]) => ({
      bytes: Buffer.from(text({ ...removeRequest, [field]: v })),
      ...idAfter(field, v)
    })),
    // A NUL in a string: the native spawner cannot use it, the Node one fails it by its id.
    fc.tuple(fc.constantFrom(...Object.keys(withNul)), fc.string({ maxLength: 8 })).map(([field, s]) => {
      const r = { ...spawnRequest }
      withNul[field]!(r, `${s}\u0000${s}`)
      return { bytes: Buffer.from(text(r)), id }
    }),
    // Cut short: no longer JSON.
    fc.nat().map((n) => {
      const t = Buffer.from(text(spawnRequest))
      return { bytes: t.subarray(0, n % (t.length - 1)) }
    }),
    // Raw bytes anywhere after its id (a request they leave valid is answered by that id).
    fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([n, b]) => {
      const t = Buffer.from(text(spawnRequest))
      const afterId = t.indexOf(`"id":${id},`) + `"id":${id},`.length
      const at = afterId + n % (t.length - afterId)
      const inserted = Buffer.from(b.map((c) => (c === NEWLINE ? 0 : c)))
      return { bytes: Buffer.concat([t.subarray(0, at), inserted, t.subarray(at)]), id }
    })
  )
}

/**
 * Feeds `lines` to a spawner started for this process, and collects its replies until each line has one: a
 * `rejected` naming its number, or, for a line whose id the spawner may read, any reply to that id. A line left
 * unanswered fails the test (after 10 s: a bound, not a timing).
 */
const feed = (p: (typeof programs)[number], dir: string, lines: ReadonlyArray<Line>) =>
  Effect.gen(function*() {
    const command = p.node ? process.execPath : p.program
    const args = [...(p.node ? [p.program] : []), "kiln-spawner", String(process.pid)]
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(command, args, { cwd: dir, stdio: ["pipe", "pipe", "pipe"], env: {} })),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    const replies: Array<Protocol.Reply> = []
    let stderr = ""
    let malformed = ""
    child.stderr.on("data", (d) => (stderr += d))
    child.stdout.setEncoding("utf8")
    child.stdout.on(
      "data",
      Protocol.lineSplitter((line) => {
        const reply = Protocol.decodeReply(line)
        if (reply.kind === "malformed") malformed += `${reply.reason}\n`
        else replies.push(reply)
      })
    )
    child.stdin.on("error", () => undefined)
    child.stdin.write(Buffer.concat(lines.flatMap((l) => [l.bytes, Buffer.from("\n")])))
    const answered = (i: number) =>
      replies.some((r) => r.kind === "rejected" ? r.line === i : lines[i]!.id !== undefined && r.id === lines[i]!.id)
    const unanswered = () => lines.map((_, i) => i).filter((i) => !answered(i))
    yield* eventually(
      "every line answered",
      () => unanswered().length === 0 || malformed !== "" || child.exitCode !== null,
      "10 seconds"
    ).pipe(Effect.catchAll(() => Effect.void))
    assert.strictEqual(malformed, "", "every reply is one the engine reads")
    assert.isNull(child.exitCode, `the spawner exited early: ${stderr}`)
    const left = unanswered().map((i) => lines[i]!.bytes.toString("latin1"))
    assert.strictEqual(
      left.length,
      0,
      `lines left without an answer: ${JSON.stringify(left)}; ${JSON.stringify(replies)}`
    )
    // Rejected lines are answered once each, in the order read.
    const rejected = replies.flatMap((r) => (r.kind === "rejected" ? [r.line] : []))
    assert.deepStrictEqual(rejected, [...new Set(rejected)].sort((a, b) => a - b))
    child.stdin.end()
    yield* eventually("the spawner exits at the end of its input", () => child.exitCode !== null)
    assert.strictEqual(child.exitCode, 0, stderr)
    assert.strictEqual(stderr, "")
    return replies
  })

describe.each(programs)("the spawner ($name), fed anything", (p) => {
  it.scopedLive.prop(
    "every line gets an answer: none is dropped, none hangs",
    [fc.array(fc.oneof(junk, fc.nat()), { minLength: 1, maxLength: 12 })],
    ([shape]) =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-malformed-")
        // Output files named with raw bytes that are not UTF-8, which a listing by string cannot name to remove.
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const name of fs.readdirSync(dir, { encoding: "buffer" })) {
              fs.rmSync(Buffer.concat([Buffer.from(`${dir}/`), name]), { recursive: true, force: true })
            }
          })
        )
        // Each broken request its own id (its index), so that an answer names the line it is for.
        const lines: Array<Line> = []
        for (const [i, item] of shape.entries()) {
          lines.push(typeof item === "number" ? fc.sample(broken(dir, i + 100), { numRuns: 1, seed: item })[0]! : item)
        }
        yield* feed(p, dir, lines)
      }),
    { fastCheck: { numRuns: p.node ? 15 : 40 } }
  )

  it.scopedLive("a raw control byte or a repeated field in a request: refused, and no file made by a cut path", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-malformed-")
      // JSON escapes control characters; raw ones are not JSON. A raw NUL read into a C string would end the path
      // there: `<dir>/a<NUL>b/out` would name `<dir>/a`.
      const withRaw = (field: "stdout" | "cwd" | "argv", byte: number, id: number): Line => {
        const marked = `${dir}/a@@b`
        const request = {
          kind: "spawn",
          id,
          argv: field === "argv" ? ["/bin/true", marked] : ["/bin/true"],
          cwd: field === "cwd" ? marked : dir,
          env: {},
          stdout: field === "stdout" ? `${marked}/out` : path.join(dir, `out-${id}`),
          stderr: path.join(dir, `err-${id}`)
        }
        const [head, tail] = JSON.stringify(request).split("@@") as [string, string]
        return { bytes: Buffer.concat([Buffer.from(head), Buffer.from([byte]), Buffer.from(tail)]), id }
      }
      const text = JSON.stringify({ kind: "spawn", id: 9, argv: ["/bin/true"], cwd: dir, env: {}, stdout: "x" })
      const repeated: Line = {
        bytes: Buffer.from(`${text.slice(0, -1)},"stdout":${JSON.stringify(path.join(dir, "o"))},"stderr":"e"}`),
        id: 9
      }
      const lines = [withRaw("stdout", 0, 1), withRaw("stdout", 0x1f, 2), withRaw("cwd", 0, 3), withRaw("argv", 1, 4)]
      const replies = yield* feed(p, dir, [...lines, ...(p.node ? [] : [repeated])])
      for (const [i] of lines.entries()) {
        assert.isTrue(replies.some((r) => r.kind === "rejected" && r.line === i), JSON.stringify(replies))
      }
      if (!p.node) assert.isTrue(replies.some((r) => r.kind === "rejected" && r.line === 4), JSON.stringify(replies))
      assert.deepStrictEqual(fs.readdirSync(dir), [])
    }))

  it.scoped("a spawn whose argv holds a NUL: the engine's request fails with a SpawnError, and the next one runs", () =>
    withProgram(
      p.program,
      Effect.gen(function*() {
        const dir = yield* tempDir()
        const spawner = yield* Spawner.make()
        const request = (argv: ReadonlyArray<string>, env: Record<string, string> = {}): Spawner.Request => ({
          argv,
          cwd: dir,
          env,
          stdout: path.join(dir, "out"),
          stderr: path.join(dir, "err")
        })
        for (const bad of [request(["/bin/echo", "a\u0000b"]), request(["/bin/true"], { A: "x\u0000y" })]) {
          const error = yield* Effect.flip(
            ProcessGroup.spawnGroup(spawner, bad, "1 second").pipe(Effect.timeout("20 seconds"))
          )
          assert.instanceOf(error, SpawnError, String(error))
        }
        const group = yield* ProcessGroup.spawnGroup(spawner, request(["/bin/sh", "-c", "exit 4"]), "1 second")
        assert.strictEqual((yield* Deferred.await(group.exited)).code, 4)
      })
    ))
})

describe("the engine's side, answered by line", () => {
  const request = (dir: string): Spawner.Request => ({
    argv: ["/bin/true"],
    cwd: dir,
    env: {},
    stdout: path.join(dir, "out"),
    stderr: path.join(dir, "err")
  })

  /** A stand-in spawner (a Node script) that answers the first line it reads with `reply`. */
  const answering = (dir: string, reply: string) => {
    const program = path.join(dir, "answering.cjs")
    fs.writeFileSync(
      program,
      `process.stdin.once("data", () => process.stdout.write(${JSON.stringify(`${reply}\n`)}))\n` +
        `process.stdin.on("end", () => process.exit(0))\n`
    )
    return program
  }

  it.scoped("a refusal of the request's line fails that request with the spawner's reason", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const program = answering(dir, `{"kind":"rejected","line":0,"reason":"a bad \\"argv\\" in the request x"}`)
      const error = yield* withProgram(
        program,
        Effect.flip(Effect.flatMap(Spawner.make(), (s) => s.spawn(request(dir))))
      )
      assert.instanceOf(error, SpawnError)
      assert.include(error.message, "the spawner refused the request: a bad \"argv\"")
    }))

  it.scoped("a refusal of a line that holds no waiting request: the spawner is not trusted, the request fails", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir()
      const program = answering(dir, `{"kind":"rejected","line":7,"reason":"not JSON in the request x"}`)
      const error = yield* withProgram(
        program,
        Effect.flip(Effect.flatMap(Spawner.make(), (s) => s.spawn(request(dir))))
      )
      assert(!(error instanceof SpawnError) && error.code === Spawner.LOST, String(error))
      assert.include(error.message, "refused line 7")
    }))

  it.scopedLive("a run waiting on a spawner that stopped reading can be interrupted; what it starts later dies", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-stopped-")
      // A copy of sleep under the temp dir: its path in /proc/*/cmdline is this test's marker.
      const sleep = path.join(dir, "marker-sleep")
      fs.copyFileSync("/bin/sleep", sleep)
      fs.chmodSync(sleep, 0o755)
      const survivors = () =>
        fs.readdirSync("/proc").filter((n) => {
          if (!/^\d+$/.test(n)) return false
          try {
            return fs.readFileSync(`/proc/${n}/cmdline`, "utf8").startsWith(sleep)
          } catch {
            return false
          }
        })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => survivors().forEach((n) => process.kill(Number(n), "SIGKILL")))
      )
      const scope = yield* Scope.make()
      const before = new Set(helpersOf("kiln-spawner", process.pid))
      const spawner = yield* Scope.extend(Spawner.make(), scope)
      yield* spawner.warmUp
      const pid = helpersOf("kiln-spawner", process.pid).find((p) => !before.has(p))!
      assert.isDefined(pid)
      process.kill(pid, "SIGSTOP")
      yield* Effect.addFinalizer(() => Effect.sync(() => process.kill(pid, "SIGCONT")))
      const spawning = yield* Effect.fork(
        Effect.scoped(
          ProcessGroup.spawnGroup(spawner, { ...request(dir), argv: [sleep, "600"] }, "1 second").pipe(
            Effect.flatMap((group) => Deferred.await(group.exited))
          )
        )
      )
      yield* Effect.yieldNow()
      const interrupted = yield* Fiber.interrupt(spawning).pipe(Effect.timeout("20 seconds"))
      assert.isTrue(Exit.isInterrupted(interrupted))
      // The spawner reads the request once it runs again, and starts the process: nobody waits for it, so it dies.
      process.kill(pid, "SIGCONT")
      yield* eventually("the process started after its run gave up is killed", () => {
        const started = fs.existsSync(path.join(dir, "out"))
        return started && survivors().length === 0
      }, "20 seconds")
      yield* Scope.close(scope, Exit.void)
    }))
})
