/**
 * What kiln says of the sandbox before a run, against a fake probe: where the strict view cannot be made, `auto` warns
 * once naming why and runs, `strict` refuses in one line (exit 2) naming why and where the mode came from, `off` says
 * nothing; where it can, nothing is said.
 */
import { assert, describe, it } from "@effect/vitest"
import { fromOf, noticeOf } from "../../src/programs/kiln/run/sandboxNotice.js"

const refused = { works: false, why: "unshare(CLONE_NEWUSER): EPERM (check kernel.unprivileged_userns_clone)" }
const works = { works: true, why: "" }

describe("sandbox notice", () => {
  it("strict where namespaces are refused: one line naming why and the setting, a refusal", () => {
    assert.deepStrictEqual(noticeOf("strict", fromOf("strict"), refused), {
      _tag: "Refuse",
      line: "kiln: --sandbox strict: this machine cannot give processes the strict sandbox: " + refused.why
    })
    const fromConfig = noticeOf("strict", fromOf(undefined), refused)
    assert.strictEqual(fromConfig?._tag, "Refuse")
    assert.match(fromConfig!.line, /^kiln: kiln\.json's "sandbox": "strict": .*EPERM/)
  })

  it("auto where namespaces are refused: one warning line naming why; off: nothing", () => {
    const warned = noticeOf("auto", fromOf(undefined), refused)
    assert.strictEqual(warned?._tag, "Warn")
    assert.include(warned!.line, refused.why)
    assert.notInclude(warned!.line, "\n")
    assert.isUndefined(noticeOf("off", fromOf("off"), refused))
  })

  it("where the strict view works, nothing is said", () => {
    for (const mode of ["strict", "auto", "off"] as const) assert.isUndefined(noticeOf(mode, fromOf(mode), works))
  })

  it("a build without a probe: strict is refused, auto runs as before without a word", () => {
    assert.strictEqual(noticeOf("strict", fromOf("strict"), undefined)?._tag, "Refuse")
    assert.isUndefined(noticeOf("auto", fromOf(undefined), undefined))
  })
})
