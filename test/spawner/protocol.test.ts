/**
 * The spawner's protocol: every message kind survives its encoding, a line that is not a message is named as such
 * (with the field that is wrong), and lines split across chunks arrive whole.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Protocol from "../../src/layers/spawner/Protocol.js"

const spawn: Protocol.Spawn = {
  kind: "spawn",
  id: 0,
  argv: ["/bin/sh", "-c", "echo \"quoted\"\nand a newline"],
  cwd: "/tmp/sand box",
  env: { PATH: "/usr/bin:/bin", EMPTY: "" },
  stdout: "/tmp/s.stdout",
  stderr: "/tmp/s.stderr"
}

const requests: ReadonlyArray<Protocol.Request> = [
  spawn,
  { kind: "remove", id: 1, paths: ["/tmp/sandbox", "/tmp/sandbox.stdout"] },
  { kind: "remove", id: 2, paths: [] },
  { kind: "arm", argv: ["/usr/bin/node", "/x/cli.js", "sandboxer"], log: "/tmp/post-mortem.log" },
  { kind: "disarm" }
]

const replies: ReadonlyArray<Protocol.Reply> = [
  { kind: "started", id: 0, pid: 4242 },
  { kind: "exited", id: 0, code: 3, signal: null, alone: true },
  { kind: "exited", id: 0, code: null, signal: "SIGKILL", alone: false },
  { kind: "removed", id: 1 },
  { kind: "failed", id: 2, code: "ETXTBSY", message: "spawn ./tool ETXTBSY" }
]

const reasonOf = (m: Protocol.Request | Protocol.Reply | Protocol.Malformed) =>
  m.kind === "malformed" ? m.reason : assert.fail(`decoded as a ${m.kind}`)

describe("the spawner's protocol", () => {
  it("every request kind decodes to what was encoded, as one line", () => {
    for (const request of requests) {
      const line = Protocol.encode(request)
      assert.strictEqual(line.indexOf("\n"), line.length - 1)
      assert.deepStrictEqual(Protocol.decodeRequest(line.slice(0, -1)), request)
    }
  })

  it("every reply kind decodes to what was encoded, as one line", () => {
    for (const reply of replies) {
      const line = Protocol.encode(reply)
      assert.strictEqual(line.indexOf("\n"), line.length - 1)
      assert.deepStrictEqual(Protocol.decodeReply(line.slice(0, -1)), reply)
    }
  })

  it("a line that is not a message says why, naming the field and quoting the line", () => {
    assert.include(reasonOf(Protocol.decodeRequest("{oops")), "not JSON in the request {oops")
    assert.include(reasonOf(Protocol.decodeRequest("[]")), "no such kind")
    assert.include(reasonOf(Protocol.decodeRequest(`{"kind":"started","id":1,"pid":2}`)), `no such kind "started"`)
    assert.include(reasonOf(Protocol.decodeReply(`{"kind":"spawn"}`)), `no such kind "spawn" in the reply`)
    const noArgv = Protocol.encode({ ...spawn, argv: [] }).trim()
    assert.include(reasonOf(Protocol.decodeRequest(noArgv)), `a spawn with a bad or missing "argv"`)
    const badEnv = JSON.stringify({ ...spawn, env: { N: 1 } })
    assert.include(reasonOf(Protocol.decodeRequest(badEnv)), `"env"`)
    assert.include(reasonOf(Protocol.decodeReply(`{"kind":"started","id":1}`)), `a started with a bad or missing "pid"`)
    assert.include(reasonOf(Protocol.decodeReply(`{"kind":"exited","id":1,"code":0,"signal":null}`)), `"alone"`)
    const long = reasonOf(Protocol.decodeRequest(`{"kind":"remove","id":-1,"paths":["${"x".repeat(500)}"]}`))
    assert.include(long, `"id"`)
    assert.isBelow(long.length, 250)
  })

  it("lines split across chunks, or several in one, arrive whole and in order", () => {
    const lines: Array<string> = []
    const split = Protocol.lineSplitter((line) => lines.push(line))
    const text = replies.map(Protocol.encode).join("")
    for (let i = 0; i < text.length; i += 7) split(text.slice(i, i + 7))
    split("")
    assert.deepStrictEqual(lines.map(Protocol.decodeReply), [...replies])
    split("{\"kind\":\"removed\",")
    assert.strictEqual(lines.length, replies.length, "a partial line waits for its end")
    split("\"id\":9}\n\n")
    assert.deepStrictEqual(lines.slice(replies.length), ["{\"kind\":\"removed\",\"id\":9}", ""])
  })
})
