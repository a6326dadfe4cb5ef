/**
 * Remote settings a hostile kiln.json (or a slip on the command line) gives, end to end through the built CLI: a
 * header name or value the transport cannot send, and TLS files that are not PEM or that a repository chose from
 * outside itself. Each is one line naming where it came from, exit 2, before anything is sent; they used to end kiln
 * with a stack (exit 1), or present the user's own key to the server the repository names.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Answer, hostileHttp } from "../utils/hostile/http.js"
import { hostileWorkspace, oneProcess, type Ran } from "../utils/hostile/workspace.js"
import { remoteServers } from "../utils/remote.js"

/** Exit 2 by itself, and exactly one line on stderr: `line`. */
const refusedWith = (r: Ran, line: string) => {
  assert.strictEqual(r.code, 2, r.stderr)
  assert.deepStrictEqual(r.stderr.split("\n").filter((l) => l !== ""), [line])
}

const COMMANDS = [["run"], ["explain", "p"], ["remote", "status"]]

describe("a header the transport cannot send is a settings error, naming where it came from", () => {
  for (const command of COMMANDS) {
    it.scoped(`kiln ${command.join(" ")}: a line break in kiln.json's header value, over HTTP`, () =>
      Effect.gen(function*() {
        const server = yield* hostileHttp
        server.answer("ac/*", Answer.status(404))
        const w = yield* hostileWorkspace(oneProcess({ cache: server.url, headers: { "x-a": "1\r\nx-injected: 1" } }))
        refusedWith(
          yield* w.kiln(command),
          "kiln: kiln.json: remote.headers.x-a: its value holds a line break (U+000D), which would end the header: " +
            "a value is one line"
        )
        assert.deepStrictEqual(server.received, [])
        assert.strictEqual(w.output(), undefined)
      }))

    it.scoped(`kiln ${command.join(" ")}: a non-Latin-1 character from the user's $VAR, over gRPC`, () =>
      Effect.gen(function*() {
        const w = yield* hostileWorkspace()
        refusedWith(
          yield* w.kiln([...command, "--remote-cache", "grpc://127.0.0.1:9", "--remote-header", "x-a=$V"], {
            V: "\uff04"
          }),
          "kiln: --remote-header x-a: $V's value holds U+FF04, which a header cannot carry: use printable ASCII"
        )
      }))
  }

  it.scoped("a name gRPC metadata cannot have, from kiln.json, while HTTP takes it", () =>
    Effect.gen(function*() {
      const grpcWs = yield* hostileWorkspace(oneProcess({ cache: "grpc://127.0.0.1:9", headers: { "x!a": "1" } }))
      refusedWith(
        yield* grpcWs.kiln(["remote", "status"]),
        "kiln: kiln.json: remote.headers.x!a: `x!a` is not a gRPC metadata key: use letters, digits and - _ ."
      )
      const binWs = yield* hostileWorkspace(oneProcess({ cache: "grpc://127.0.0.1:9", headers: { "x-bin": "1" } }))
      refusedWith(
        yield* binWs.kiln(["remote", "status"]),
        "kiln: kiln.json: remote.headers.x-bin: `x-bin` names binary gRPC metadata, which kiln does not send: use " +
          "another name"
      )
      const server = yield* hostileHttp
      const httpWs = yield* hostileWorkspace(oneProcess({ cache: server.url, headers: { "X!A": "a\tb" } }))
      const ran = yield* httpWs.kiln(["run"])
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.isTrue(server.received.length > 0)
      for (const r of server.received) assert.strictEqual(r.headers["x!a"], "a\tb")
    }))

  it.scoped("a name that is no header name at all, on the command line", () =>
    Effect.gen(function*() {
      const w = yield* hostileWorkspace()
      refusedWith(
        yield* w.kiln(["run", "--remote-cache", "http://127.0.0.1:9", "--remote-header", "x a\u0001=1"]),
        "kiln: --remote-header x a\\u0001: `x a\\u0001` is not a header name: use letters, digits and - _ ."
      )
    }))
})

describe("kiln.json's TLS files stay inside the workspace; every TLS file is PEM", () => {
  const victimKey = (root: string) => {
    const file = path.join(root, "victim.key")
    fs.copyFileSync(remoteServers().tlsClientKey, file)
    return file
  }

  it.scoped("an absolute path, a ../ path and a symlink out: refused, pointing to the command line", () =>
    Effect.gen(function*() {
      const probe = yield* hostileWorkspace()
      const key = victimKey(probe.root)
      const cert = path.join(probe.root, "victim.pem")
      fs.copyFileSync(remoteServers().tlsClientCert, cert)
      const cases: ReadonlyArray<[Record<string, string>, string, string]> = [
        [{ clientKey: key, clientCert: "c.pem" }, "clientKey", `\`${key}\` is outside the workspace`],
        [{ ca: "../victim.pem" }, "ca", "`../victim.pem` is outside the workspace"],
        [
          { clientCert: "link/victim.pem", clientKey: "k.key" },
          "clientCert",
          "`link/victim.pem` leads outside the workspace"
        ]
      ]
      const option = { ca: "--remote-ca", clientCert: "--remote-client-cert", clientKey: "--remote-client-key" }
      for (const [files, field, why] of cases) {
        for (const command of COMMANDS) {
          const server = yield* hostileHttp
          const w = yield* hostileWorkspace(oneProcess({ cache: server.url.replace("http:", "https:"), ...files }))
          fs.copyFileSync(remoteServers().tlsClientCert, path.join(w.ws, "c.pem"))
          fs.copyFileSync(remoteServers().tlsClientKey, path.join(w.ws, "k.key"))
          fs.copyFileSync(cert, path.join(w.root, "victim.pem"))
          fs.symlinkSync(w.root, path.join(w.ws, "link"))
          refusedWith(
            yield* w.kiln(command),
            `kiln: kiln.json: remote.${field}: ${why}: a repository may not choose which of your certificates and ` +
              `keys kiln presents; pass ${option[field as keyof typeof option]} on the command line instead`
          )
          assert.deepStrictEqual(server.received, [])
        }
      }
    }))

  it.scoped("the same files are the user's to give on the command line; one inside the workspace is kiln.json's", () =>
    Effect.gen(function*() {
      const s = remoteServers()
      const w = yield* hostileWorkspace(oneProcess({ cache: s.httpsUrl, ca: "certs/ca.pem" }))
      fs.mkdirSync(path.join(w.ws, "certs"))
      fs.copyFileSync(s.tlsCa, path.join(w.ws, "certs", "ca.pem"))
      const ran = yield* w.kiln([
        "remote",
        "status",
        "--remote-client-cert",
        s.tlsClientCert,
        "--remote-client-key",
        victimKey(w.root)
      ])
      assert.strictEqual(ran.code, 0, ran.stderr)
    }))

  it.scoped("a file that is not PEM, or not there: one line naming the option and the path", () =>
    Effect.gen(function*() {
      const w = yield* hostileWorkspace()
      const junk = path.join(w.root, "junk.pem")
      fs.writeFileSync(junk, "TOPSECRET-LINE-1 hunter2\n")
      const url = "https://127.0.0.1:9"
      const s = remoteServers()
      for (const command of COMMANDS) {
        refusedWith(
          yield* w.kiln([...command, "--remote-cache", url, "--remote-ca", junk]),
          `kiln: --remote-ca: \`${junk}\` is not a PEM certificate`
        )
        refusedWith(
          yield* w.kiln([...command, "--remote-cache", url, "--remote-client-cert", junk, "--remote-client-key", junk]),
          `kiln: --remote-client-cert: \`${junk}\` is not a PEM certificate`
        )
        refusedWith(
          yield* w.kiln([
            ...command,
            "--remote-cache",
            url,
            "--remote-client-cert",
            s.tlsClientCert,
            "--remote-client-key",
            junk
          ]),
          `kiln: --remote-client-key: \`${junk}\` is not a PEM private key (unencrypted)`
        )
        refusedWith(
          yield* w.kiln([
            ...command,
            "--remote-cache",
            url,
            "--remote-client-cert",
            s.tlsClientCert,
            "--remote-client-key",
            s.tlsClientCert
          ]),
          `kiln: --remote-client-key: \`${s.tlsClientCert}\` is not a PEM private key (unencrypted)`
        )
        refusedWith(
          yield* w.kiln([...command, "--remote-cache", url, "--remote-ca", `${junk}.gone`]),
          `kiln: --remote-ca: cannot read \`${junk}.gone\`: ENOENT`
        )
      }
    }))

  it.scoped("kiln.json's certificate a FIFO or a huge file: one line, at once (it hung in open, or took gigabytes)", () =>
    Effect.gen(function*() {
      const url = "https://127.0.0.1:9"
      for (
        const [name, make] of [
          ["ca.fifo", (at: string) => assert.strictEqual(spawnSync("mkfifo", [at]).status, 0)],
          ["ca.huge", (at: string) => {
            fs.closeSync(fs.openSync(at, "w"))
            fs.truncateSync(at, 2_000_000_000)
          }]
        ] as const
      ) {
        const w = yield* hostileWorkspace(oneProcess({ cache: url, ca: name }))
        make(path.join(w.ws, name))
        const r = yield* w.kiln(["remote", "status"])
        assert.strictEqual(r.code, 2, r.stderr)
        assert.match(
          r.stderr,
          name === "ca.fifo"
            ? /^kiln: kiln\.json: remote\.ca: cannot read `ca\.fifo`: is not a regular file\n$/
            : /^kiln: kiln\.json: remote\.ca: cannot read `ca\.huge`: is larger than 16777216 bytes \(2000000000\)\n$/
        )
      }
    }))

  it.scoped("a --remote-log a workspace committed as a link is not appended through: one line, the target unchanged", () =>
    Effect.gen(function*() {
      const w = yield* hostileWorkspace()
      const target = path.join(w.root, "precious.txt")
      fs.writeFileSync(target, "precious\n")
      const log = path.join(w.ws, "remote.log")
      fs.symlinkSync(target, log)
      refusedWith(
        yield* w.kiln(["remote", "status", "--remote-cache", "http://127.0.0.1:9", "--remote-log", log]),
        `kiln: --remote-log: \`${log}\` is a symlink, which kiln does not write through`
      )
      assert.strictEqual(fs.readFileSync(target, "utf8"), "precious\n")
    }))
})
