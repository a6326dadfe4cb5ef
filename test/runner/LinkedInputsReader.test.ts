/**
 * A process that reads a large input while another process of the same run writes into it through its hard link to
 * the store's blob (red team V6, H2 with the reader running at once): the reader saw bytes that are not its input's,
 * so its result is no result. It fails with one line naming the input, its digest and that a process of the run wrote
 * into it (suggesting `writableInputs`); its output is not written back, nothing is cached; the writer fails the
 * same way. The next run stores the blob again from the workspace, and the reader gets the clean bytes.
 *
 * Deterministic: the writer waits for a marker the reader makes once it runs (its sandbox linked), the reader for the
 * writer's marker once the bytes are written. The markers are outside the sandboxes (no mount namespace here:
 * `KILN_MOUNT_NAMESPACES=0`).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { runCli } from "../utils/cliRun.js"
import { tempDir } from "../utils/temp.js"

const MIB = 1024 * 1024

describe("a process reading a large input another process of the run writes into (through the CLI)", () => {
  it.scoped("the reader fails naming the input, its output is not written back; the next run reads clean bytes", () =>
    Effect.gen(function*() {
      const root = yield* tempDir("kiln-linked-reader-")
      const ws = path.join(root, "ws")
      const markers = path.join(root, "markers")
      fs.mkdirSync(ws)
      fs.mkdirSync(markers)
      const content = randomBytes(MIB)
      fs.writeFileSync(path.join(ws, "big.bin"), content)
      const readerRuns = path.join(markers, "reader-runs")
      const written = path.join(markers, "written")
      const waitFor = (file: string) => `until [ -e ${file} ]; do sleep 0.01; done`
      fs.writeFileSync(
        path.join(ws, "kiln.json"),
        JSON.stringify({
          processes: {
            A: {
              argv: [
                "/bin/sh",
                "-c",
                `${
                  waitFor(readerRuns)
                }; chmod u+w big.bin; printf CORRUPTED | dd of=big.bin conv=notrunc 2>/dev/null; ` +
                `: > ${written}; echo done > a.txt`
              ],
              inputs: ["big.bin"],
              outputs: ["a.txt"],
              env: { PATH: "/usr/bin:/bin" }
            },
            B: {
              argv: ["/bin/sh", "-c", `: > ${readerRuns}; ${waitFor(written)}; head -c 9 big.bin > b.txt`],
              inputs: ["big.bin"],
              outputs: ["b.txt"],
              env: { PATH: "/usr/bin:/bin" }
            }
          }
        })
      )
      const store = path.join(root, "store")
      const env = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...(process.env.KILN_SPAWNER !== undefined ? { KILN_SPAWNER: process.env.KILN_SPAWNER } : {}),
        HOME: root,
        // No mount namespace: the markers are outside the sandboxes, and the check after the process is what is
        // tested (with one, the input is bound read-only and the write fails first).
        KILN_MOUNT_NAMESPACES: "0"
      }
      const kiln = (args: ReadonlyArray<string>) => runCli(args, { cwd: ws, env })
      const run = ["run", "--store-dir", store, "--progress", "plain"]
      const digest = `${createHash("sha256").update(content).digest("hex")}/${MIB}`

      const r = yield* kiln([...run, "--concurrency", "3"])
      assert.isNull(r.signal, r.stderr)
      assert.strictEqual(r.code, 1, r.stderr)
      const refused = (name: string) =>
        new RegExp(
          `^✗ ${name}: its input big\\.bin, a hard link to the store's ${digest}, was written into while it ran, by it ` +
            "or by another process of this run: (removed from the store, and )?its result refused \\(a process that " +
            "writes into an input declares it in `writableInputs`\\)$",
          "m"
        )
      assert.match(r.stderr, refused("B"))
      assert.match(r.stderr, refused("A"))
      assert.notMatch(r.stderr, /^✓ [AB]\b/m)
      assert.isFalse(fs.existsSync(path.join(ws, "b.txt")), "the reader's output (CORRUPTED) is not written back")
      assert.isFalse(fs.existsSync(path.join(ws, "a.txt")))
      assert.isTrue(fs.readFileSync(path.join(ws, "big.bin")).equals(content), "the workspace's file is untouched")
      const check = yield* kiln(["store", "check", "--store-dir", store])
      assert.strictEqual(check.code, 0, check.stderr)

      // The reader alone (its marker is there): the blob is stored again from the workspace, its bytes are clean.
      const again = yield* kiln([...run, "B"])
      assert.strictEqual(again.code, 0, again.stderr)
      assert.match(again.stderr, /^✓ B /m)
      assert.isTrue(fs.readFileSync(path.join(ws, "b.txt")).equals(content.subarray(0, 9)))
    }))
})
