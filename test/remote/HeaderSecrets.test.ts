/**
 * Remote headers and the user's secrets, end to end through the built CLI against a hostile HTTP cache that records
 * every request's headers. A checked-in kiln.json names the server and may set literal headers, but never one read
 * from the user's environment (`$VAR`): that is the user's to give, on the command line. A literal value on the
 * command line, which every local user can read in `ps`, and headers sent unencrypted to another machine, are
 * warned about once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Answer, hostileHttp } from "../utils/hostile/http.js"
import { hostileWorkspace, oneProcess } from "../utils/hostile/workspace.js"

const SECRETS = { GITHUB_TOKEN: "ghp_victimtoken123", AWS_SECRET_ACCESS_KEY: "aws-victim-secret" }

/** Whether any request the server received carried `secret` in a header. */
const leaked = (received: ReadonlyArray<{ readonly headers: Record<string, unknown> }>, secret: string) =>
  received.some((r) => JSON.stringify(r.headers).includes(secret))

const warnings = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("kiln: warning:"))

describe("a checked-in kiln.json cannot send the user's environment to a server", () => {
  for (const command of [["run"], ["explain", "p"], ["remote", "status"]]) {
    it.scoped(`kiln ${command.join(" ")}: a $VAR header in kiln.json is refused (exit 2) and nothing is sent`, () =>
      Effect.gen(function*() {
        const server = yield* hostileHttp
        server.answer("ac/*", Answer.status(404))
        const w = yield* hostileWorkspace(oneProcess({
          cache: server.url,
          headers: { authorization: "$GITHUB_TOKEN", "x-aws": "$AWS_SECRET_ACCESS_KEY" }
        }))
        const ran = yield* w.kiln(command, SECRETS)
        assert.strictEqual(ran.code, 2, ran.stderr)
        assert.deepStrictEqual(ran.stderr.trimEnd().split("\n"), [
          "kiln: kiln.json: remote.headers.authorization: $GITHUB_TOKEN is read from your environment only for " +
          "headers you give yourself: pass --remote-header 'authorization=$GITHUB_TOKEN' on the command line instead"
        ])
        for (const secret of Object.values(SECRETS)) assert.isFalse(leaked(server.received, secret), secret)
        assert.strictEqual(w.output(), undefined)
      }))
  }

  it.scoped("the user's own --remote-header NAME=$VAR reaches the server kiln.json names, with its literal headers", () =>
    Effect.gen(function*() {
      const server = yield* hostileHttp
      const w = yield* hostileWorkspace(oneProcess({ cache: server.url, headers: { "x-team": "build" } }))
      const ran = yield* w.kiln(["run", "--remote-header", "authorization=$GITHUB_TOKEN"], SECRETS)
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.deepStrictEqual(warnings(ran.stderr), [])
      assert.isTrue(server.received.length > 0)
      for (const r of server.received) {
        assert.strictEqual(r.headers.authorization, SECRETS.GITHUB_TOKEN)
        assert.strictEqual(r.headers["x-team"], "build")
      }
      assert.isFalse(leaked(server.received, SECRETS.AWS_SECRET_ACCESS_KEY))
    }))
})

describe("headers a local user or the network could read are warned about, once", () => {
  it.scoped("a literal --remote-header value: one warning pointing to the $VAR form; the run goes on", () =>
    Effect.gen(function*() {
      const server = yield* hostileHttp
      const w = yield* hostileWorkspace()
      const ran = yield* w.kiln([
        "run",
        "--remote-cache",
        server.url,
        "--remote-header",
        "x-literal=LITERAL-SECRET-999",
        "--remote-header",
        "x-other=another"
      ])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.deepStrictEqual(warnings(ran.stderr), [
        "kiln: warning: --remote-header x-literal: a value on the command line is visible to every local user (ps): " +
        "pass --remote-header 'x-literal=$VAR' with the value in the environment variable VAR instead"
      ])
      assert.notInclude(ran.stderr, "LITERAL-SECRET-999")
      assert.isTrue(server.received.some((r) => r.headers["x-literal"] === "LITERAL-SECRET-999"))
    }))

  it.scoped("headers to another machine over plain http://: one warning naming the endpoint", () =>
    Effect.gen(function*() {
      const w = yield* hostileWorkspace()
      const ran = yield* w.kiln(
        ["remote", "status", "--remote-cache", "http://kiln-test.invalid:9", "--remote-header", "authorization=$T"],
        { T: "token" }
      )
      assert.deepStrictEqual(warnings(ran.stderr), [
        "kiln: warning: remote headers go to http://kiln-test.invalid:9 unencrypted: use https:// to keep them from " +
        "the network"
      ])
      assert.notInclude(ran.stderr, "token")
    }))
})
