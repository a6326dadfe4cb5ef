/**
 * What a server says in a failed call (a gRPC status message, an HTTP body) is printed by `kiln remote status`,
 * `flush`, `run`, `explain` and `verify`: a hostile server's escape sequences must reach no terminal.
 */
import { assert, describe, it } from "@effect/vitest"
import { describe as describeError, probeFailure } from "../../src/layers/remote/RemoteCache.js"
import { RemoteError } from "../../src/layers/remote/RemoteErrors.js"

const HOSTILE = "no\u001b]0;PWNED\u0007\u001b[2J\nkiln: all good\u009b31m\u202eevil"

describe("a remote's own words in kiln's lines", () => {
  it("are escaped: no control or bidirectional character, no second line", () => {
    const e = new RemoteError({
      endpoint: "grpc://127.0.0.1:9",
      method: "GetCapabilities",
      code: "UNKNOWN",
      detail: HOSTILE
    })
    for (const text of [e.message, describeError(e), probeFailure(e)]) {
      assert.notMatch(text, /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/, JSON.stringify(text))
      assert.include(text, "no\\u001b]0;PWNED\\u0007")
    }
  })
})
