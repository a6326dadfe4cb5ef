/**
 * `kiln verify` through the built CLI: a process that writes the time, one that writes a random temp path, and a
 * deterministic one, run once into the cache and then re-run with the cache off and compared with it; and one whose
 * re-run exits with another code, its outputs the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { hostileWorkspace } from "../utils/hostile/workspace.js"

const config = {
  processes: {
    time: {
      argv: ["/bin/sh", "-c", "mkdir -p out/time && echo built > out/time/a.txt && date +%s%N > out/time/stamp.txt"],
      outputs: ["out/time/"],
      env: { PATH: "/usr/bin:/bin" }
    },
    temp: {
      argv: ["/bin/sh", "-c", "mkdir -p out && { echo first; mktemp -u; } > out/temp.txt"],
      outputs: ["out/temp.txt"],
      env: { PATH: "/usr/bin:/bin" }
    },
    same: {
      argv: ["/bin/sh", "-c", "mkdir -p out && echo same > out/same.txt"],
      outputs: ["out/same.txt"],
      env: { PATH: "/usr/bin:/bin" }
    }
  }
}

interface Verified {
  readonly processes: ReadonlyArray<{
    readonly name: string
    readonly status: string
    readonly differences: ReadonlyArray<{ path: string; change: string; line?: { number: number } }>
    readonly evicted?: boolean
    readonly exitCodes?: { readonly cached: number | null; readonly fresh: number | null }
  }>
  readonly reproduced: number
  readonly differ: number
  readonly notCached: number
  readonly evicted: number
}

describe("kiln verify", () => {
  it.scoped(
    "names the processes that do not reproduce, with the paths and first lines that differ; changes no entry unless asked",
    () =>
      Effect.gen(function*() {
        const w = yield* hostileWorkspace(config)
        const nothingYet = yield* w.kiln(["verify"])
        assert.strictEqual(nothingYet.code, 0, nothingYet.stderr)
        assert.match(nothingYet.stderr, /kiln: verify: 0 re-run: 0 reproduced, 0 differ; 3 not in the cache/)

        const first = yield* w.kiln(["run"])
        assert.strictEqual(first.code, 0, first.stderr)
        assert.strictEqual(first.summary!.ran, 3, first.stderr)

        const v = yield* w.kiln(["verify"])
        assert.strictEqual(v.code, 1, v.stderr)
        assert.match(v.stdout, /^✗ time: does not reproduce its cached result \(action [0-9a-f]{64}\/\d+\)$/m)
        assert.match(v.stdout, /^ {2}changed out\/time\/stamp\.txt: line 1$/m)
        // The file that is the same in both is not named.
        assert.notInclude(v.stdout, "out/time/a.txt")
        assert.match(v.stdout, /^✗ temp: does not reproduce/m)
        assert.match(
          v.stdout,
          /^ {2}changed out\/temp\.txt: line 2\n {4}cached: "\/tmp\/tmp\.\w+"\n {4}now: {4}"\/tmp\//m
        )
        assert.match(v.stdout, /^✓ same: reproduced its cached result$/m)
        assert.match(v.stderr, /kiln: verify: 3 re-run: 1 reproduced, 2 differ$/m)

        // Nothing changed in the cache: every process is a hit.
        const again = yield* w.kiln(["run"])
        assert.strictEqual(again.summary!.cacheHits, 3, again.stderr)

        const one = yield* w.kiln(["verify", "same"])
        assert.strictEqual(one.code, 0, one.stderr)
        assert.match(one.stderr, /kiln: verify: 1 re-run: 1 reproduced, 0 differ$/m)

        const json = yield* w.kiln(["verify", "--json"])
        assert.strictEqual(json.code, 1, json.stderr)
        const report = JSON.parse(json.stdout) as Verified
        assert.deepStrictEqual(
          report.processes.map((p) => [p.name, p.status]),
          [["time", "differs"], ["temp", "differs"], ["same", "reproduced"]]
        )
        assert.deepStrictEqual(report.processes[0]!.differences.map((d) => [d.path, d.change, d.line?.number]), [
          ["out/time/stamp.txt", "changed", 1]
        ])
        assert.deepStrictEqual([report.reproduced, report.differ, report.evicted], [1, 2, 0])

        const sampled = yield* w.kiln(["verify", "--sample", "1", "--json"])
        assert.strictEqual((JSON.parse(sampled.stdout) as Verified).processes.length, 1, sampled.stderr)

        const evicted = yield* w.kiln(["verify", "--evict", "time", "same"])
        assert.strictEqual(evicted.code, 1, evicted.stderr)
        assert.match(evicted.stdout, /^✗ time: does not reproduce .*; its entry was evicted$/m)
        assert.match(evicted.stderr, /1 entries evicted/)
        // Only the entry that did not reproduce went: `time` runs again, the others are hits.
        const after = yield* w.kiln(["run"])
        assert.strictEqual(after.summary!.ran, 1, after.stderr)
        assert.strictEqual(after.summary!.cacheHits, 2, after.stderr)

        const unknown = yield* w.kiln(["verify", "nope"])
        assert.strictEqual(unknown.code, 2, unknown.stderr)
        assert.match(unknown.stderr, /unknown process "nope"/)
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "a re-run that exits with another code than the cached result differs, though its outputs are the same",
    () =>
      Effect.gen(function*() {
        // A named cache outlives the run and is no part of the key: the re-run finds the mark the first run left.
        const w = yield* hostileWorkspace({
          processes: {
            flaky: {
              argv: ["/bin/sh", "-c", "echo out > out.txt; [ -e seen/mark ] && exit 3; touch seen/mark"],
              outputs: ["out.txt"],
              namedCaches: { seen: "seen" },
              env: { PATH: "/usr/bin:/bin" }
            }
          }
        })
        const first = yield* w.kiln(["run"])
        assert.strictEqual(first.code, 0, first.stderr)
        const v = yield* w.kiln(["verify"])
        assert.strictEqual(v.code, 1, v.stderr)
        assert.match(v.stdout, /^✗ flaky: does not reproduce its cached result \(action [0-9a-f]{64}\/\d+\)$/m)
        assert.match(v.stdout, /^ {2}exit code: cached 0, now 3$/m)
        assert.notInclude(v.stdout, "out.txt")
        assert.match(v.stderr, /kiln: verify: 1 re-run: 0 reproduced, 1 differ$/m)
        const json = yield* w.kiln(["verify", "--json"])
        assert.strictEqual(json.code, 1, json.stderr)
        const [flaky] = (JSON.parse(json.stdout) as Verified).processes
        assert.deepStrictEqual(
          [flaky?.status, flaky?.exitCodes, flaky?.differences.length],
          ["differs", { cached: 0, fresh: 3 }, 0]
        )
      }),
    { timeout: 120_000 }
  )

  it.scoped(
    "a process cached `never` is verified only when named, and then said to be not in the cache",
    () =>
      Effect.gen(function*() {
        const w = yield* hostileWorkspace({
          processes: {
            never: {
              argv: ["/bin/sh", "-c", "echo x > x.txt"],
              outputs: ["x.txt"],
              cache: "never",
              env: { PATH: "/usr/bin:/bin" }
            },
            steady: {
              argv: ["/bin/sh", "-c", "echo ok > ok.txt"],
              outputs: ["ok.txt"],
              env: { PATH: "/usr/bin:/bin" }
            }
          }
        })
        assert.strictEqual((yield* w.kiln(["run"])).code, 0)
        const all = yield* w.kiln(["verify", "--json"])
        assert.strictEqual(all.code, 0, all.stderr)
        assert.deepStrictEqual((JSON.parse(all.stdout) as Verified).processes.map((p) => [p.name, p.status]), [
          ["steady", "reproduced"]
        ])
        const named = yield* w.kiln(["verify", "never", "steady"])
        assert.strictEqual(named.code, 0, named.stderr)
        assert.match(named.stdout, /^- never: not in the cache, nothing to verify\n✓ steady: reproduced/m)
      }),
    { timeout: 120_000 }
  )

  it.scoped("names and lines a process made are escaped: none reaches the terminal raw", () =>
    Effect.gen(function*() {
      const w = yield* hostileWorkspace({
        processes: {
          odd: {
            argv: [
              "/bin/sh",
              "-c",
              "mkdir -p out && n=$(printf 'x\\033]0;T\\007\\342\\200\\256y') && printf 'a\\033[2J%s\\n' \"$(date +%s%N)\" > \"out/$n\""
            ],
            outputs: ["out/"],
            env: { PATH: "/usr/bin:/bin" }
          }
        }
      })
      assert.strictEqual((yield* w.kiln(["run"])).code, 0)
      const v = yield* w.kiln(["verify"])
      assert.strictEqual(v.code, 1, v.stderr)
      assert.notMatch(v.stdout, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/, v.stdout)
      assert.include(v.stdout, "changed out/x\\u001b]0;T\\u0007\\u202ey: line 1")
    }))
})
