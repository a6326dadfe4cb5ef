/**
 * Processes through /proc: the stat parser on real processes (one whose command name holds spaces and parentheses),
 * liveness of a real zombie, owners, and the process-group scans. Every process is SIGKILLed with its scope.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as MountNamespace from "../../src/os/mounts/MountNamespace.js"
import * as Proc from "../../src/os/Proc.js"
import { eventually, firstLine, spawnScoped } from "../utils/child.js"
import { tempDir } from "../utils/temp.js"

const commOf = (pid: number) => fs.readFileSync(`/proc/${pid}/comm`, "utf8").trimEnd()
/** The state letter `/proc/<pid>/status` gives, read apart from the stat line the parser reads. */
const statusStateOf = (pid: number) => /^State:\s+(\S)/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]

/** A stat line as the kernel writes it: 52 fields, field `n` holding `f<n>` unless given. */
const statLine = (pid: number, comm: string, fields: Record<number, string>) => {
  const out = [String(pid), `(${comm})`]
  for (let n = 3; n <= 52; n++) out.push(fields[n] ?? `${n}`)
  return `${out.join(" ")}\n`
}

describe("Proc.parseStat", () => {
  it("counts fields after the last parenthesis of the command name", () => {
    for (const comm of ["sleep", "a b", "a) b (c", ") S 9 9 9", "(", ""]) {
      const line = statLine(42, comm, { 3: "S", 4: "7", 5: "42", 22: "123456" })
      assert.deepStrictEqual(Proc.parseStat(line), { state: "S", ppid: 7, pgid: 42, startTime: "123456" }, comm)
    }
  })

  it("is undefined for text that is not a stat line", () => {
    for (const text of ["", "42", "42 (x)", "42 (x) S 1 2", statLine(1, "x", { 4: "one" })]) {
      assert.isUndefined(Proc.parseStat(text), JSON.stringify(text))
    }
  })

  it("reads this process", () => {
    const st = Proc.statOf(process.pid)!
    assert.strictEqual(st.ppid, process.ppid)
    assert.strictEqual(st.state, "R")
    assert.match(st.startTime, /^\d+$/)
    assert.deepStrictEqual(Proc.self(), { pid: process.pid, startTime: st.startTime })
    assert.isUndefined(Proc.statOf(0x7fffffff))
  })

  it.scopedLive("reads a real process whose command name holds spaces and parentheses", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-proc-")
      // The kernel takes the command name from the executable's file name.
      const exe = path.join(dir, "a) b (c")
      fs.copyFileSync("/bin/sleep", exe)
      fs.chmodSync(exe, 0o755)
      const child = yield* spawnScoped(exe, ["60"], { detached: true })
      const pid = child.pid!
      // Just after its exec it may still be running (its loader), not yet asleep.
      yield* eventually("the copy of sleep sleeps", () => commOf(pid) === "a) b (c" && statusStateOf(pid) === "S")
      const st = Proc.statOf(pid)!
      assert.strictEqual(st.ppid, process.pid)
      assert.strictEqual(st.pgid, pid, "detached: it leads a group of its own")
      assert.strictEqual(st.state, "S")
      assert.isTrue(Proc.ownerAlive({ pid, startTime: st.startTime }))
      assert.isFalse(Proc.ownerAlive({ pid, startTime: `${st.startTime}1` }), "a recycled pid is not its owner")
    }))
})

describe("Proc.isAlive", () => {
  it.scopedLive("a zombie is dead, although kill(pid, 0) still finds it", () =>
    Effect.gen(function*() {
      // The shell becomes `sleep`, which never reaps the child it started: killed once the exec is done (the shell
      // itself might reap it before), the child stays a zombie.
      const parent = yield* spawnScoped("sh", ["-c", "sleep 60 & echo $!; exec sleep 60"])
      const zombie = Number(yield* firstLine(parent))
      yield* eventually("the shell is sleep", () =>
        Proc.statOf(parent.pid!) !== undefined && commOf(parent.pid!) === "sleep")
      process.kill(zombie, "SIGKILL")
      yield* eventually("the child is a zombie", () =>
        Proc.statOf(zombie)?.state === "Z")
      process.kill(zombie, 0) // Does not throw: a zombie is still in the process table.
      assert.isFalse(Proc.isAlive(zombie))
      assert.isFalse(Proc.ownerAlive({ pid: zombie, startTime: "" }))
      assert.isTrue(Proc.isAlive(parent.pid!))
    }))

  it("a pid nobody has is dead; this process is alive", () => {
    assert.isFalse(Proc.isAlive(0x7fffffff))
    assert.isTrue(Proc.isAlive(process.pid))
  })
})

describe("Proc scans", () => {
  it("lists every pid, this one included, and reads working directories", () => {
    const all = Proc.pids()!
    assert.include(all, String(process.pid))
    assert.isTrue(all.every((p) => /^\d+$/.test(p)))
    assert.strictEqual(Proc.cwdOf(process.pid), process.cwd())
  })

  it.scopedLive("finds the groups working in a directory, and whether a group is alive", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("kiln-proc-")
      fs.mkdirSync(path.join(dir, "sub"))
      const child = yield* spawnScoped("sleep", ["60"], { cwd: path.join(dir, "sub"), detached: true })
      const pgid = child.pid!
      yield* eventually("sleep runs", () => Proc.statOf(pgid)?.state === "S")
      assert.deepStrictEqual([...Proc.groupsWorkingIn([dir], () => false)], [pgid])
      assert.deepStrictEqual([...Proc.groupsWorkingIn([dir], (g) => g === pgid)], [])
      assert.deepStrictEqual([...Proc.groupsWorkingIn([`${dir}-other`], () => false)], [])
      assert.isTrue(Proc.groupAlive(pgid))
      child.kill("SIGKILL")
      yield* eventually("the group is gone", () => !Proc.groupAlive(pgid))
    }))
  it.scopedLive.skipIf(MountNamespace.execRoot().root === undefined)(
    "groupsWorkingIn finds a process that sees its directory at the exec root, by what it sees there",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir("kiln-proc-pinned-")
        fs.mkdirSync(path.join(dir, "sub"))
        const { mode } = MountNamespace.probe()
        const root = MountNamespace.EXEC_ROOT
        const argv = MountNamespace.wrap(mode!, [], ["sleep", "60"], {}, { sandbox: dir, cwd: `${root}/sub` })
        const child = yield* spawnScoped(argv[0]!, argv.slice(1), { cwd: dir, detached: true })
        const pgid = child.pid!
        yield* eventually("sleep runs at the exec root", () => Proc.cwdOf(pgid) === `${root}/sub`)
        assert.deepStrictEqual([...Proc.groupsWorkingIn([dir], () => false, root)], [pgid])
        assert.deepStrictEqual([...Proc.groupsWorkingIn([dir], () => false)], [])
        const other = yield* tempDir("kiln-proc-pinned-other-")
        assert.deepStrictEqual([...Proc.groupsWorkingIn([other], () => false, root)], [])
      })
  )
})
