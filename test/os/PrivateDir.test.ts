/**
 * Which directories kiln keeps its state in: its user's own, or a group's on purpose, and nobody else's to write or
 * to swap. Owners other than root need root to set up (chown), so most cases run as root only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as PrivateDir from "../../src/os/PrivateDir.js"
import { tempDir } from "../utils/temp.js"

const isRoot = process.geteuid?.() === 0
const NOBODY = 65534
/** A group root is not in (Debian's `nogroup`). */
const OTHER_GROUP = 65534

/** A fresh directory `name` under `parent` with `mode` (chmod: the umask does not apply) and owner. */
const dir = (parent: string, name: string, mode: number, owner?: { uid: number; gid: number }) => {
  const p = path.join(parent, name)
  fs.mkdirSync(p)
  if (owner !== undefined) fs.chownSync(p, owner.uid, owner.gid)
  fs.chmodSync(p, mode)
  return p
}

describe("PrivateDir", () => {
  it.scoped("a directory of this user's that only it can write passes, as do the sticky ones above it", () =>
    Effect.gen(function*() {
      const tmp = yield* tempDir("kiln-private-dir-")
      const sticky = dir(tmp, "shm", 0o1777)
      assert.isUndefined(PrivateDir.inspect(dir(sticky, "mine", 0o700), "own"))
      assert.isUndefined(PrivateDir.inspect(dir(tmp, "readable", 0o755), "own"))
      // Missing: judged by where it would be made, then made 0700.
      const fresh = path.join(sticky, "a", "b")
      assert.isUndefined(PrivateDir.ensure(fresh, "own"))
      assert.strictEqual(fs.statSync(fresh).mode & 0o7777, 0o700)
      assert.strictEqual(fs.statSync(path.join(sticky, "a")).mode & 0o7777, 0o700)
    }))

  it.scoped("a root writable by every user is refused, sticky or not, and so is one made in it", () =>
    Effect.gen(function*() {
      const tmp = yield* tempDir("kiln-private-dir-")
      for (const mode of [0o777, 0o1777]) {
        const open = dir(tmp, `open-${mode.toString(8)}`, mode)
        const found = PrivateDir.inspect(open, "group")
        assert.deepStrictEqual(found, {
          path: open,
          owner: process.geteuid!(),
          mode,
          problem: "is writable by every user"
        })
        assert.match(
          PrivateDir.describe("store root", open, found!),
          new RegExp(
            `^refusing the store root ${open} \\(owner uid \\d+, mode ${
              mode.toString(8).padStart(4, "0")
            }\\): it is writable by every user$`
          )
        )
      }
      // Above a root, only a sticky directory may be writable by all: in any other, anyone can swap the root.
      const swappable = dir(tmp, "swappable", 0o777)
      const inside = dir(swappable, "store", 0o700)
      assert.deepStrictEqual(PrivateDir.inspect(inside, "group")?.path, swappable)
      assert.deepStrictEqual(PrivateDir.inspect(path.join(swappable, "not-yet"), "own")?.path, swappable)
      assert.throws(() => PrivateDir.ensureOrThrow("sandbox root", path.join(swappable, "x"), "own"), /refusing/)
      assert.isFalse(fs.existsSync(path.join(swappable, "x")), "nothing is made where it would be refused")
    }))

  it.scoped.skipIf(!isRoot)(
    "another user's root, or a symlink of theirs on the way, is refused (as root)",
    () =>
      Effect.gen(function*() {
        const tmp = yield* tempDir("kiln-private-dir-")
        const theirs = dir(tmp, "theirs", 0o700, { uid: NOBODY, gid: NOBODY })
        assert.deepStrictEqual(PrivateDir.inspect(theirs, "own"), {
          path: theirs,
          owner: NOBODY,
          mode: 0o700,
          problem: "is another user's (kiln runs as uid 0)"
        })
        assert.strictEqual(PrivateDir.inspect(theirs, "group")?.owner, NOBODY)
        // Above the root: they could rename it away and put theirs in its place.
        const mine = dir(theirs, "mine", 0o700)
        assert.strictEqual(PrivateDir.inspect(mine, "own")?.path, theirs)
        // A symlink they own, to a directory of mine: they can point it elsewhere at any time.
        const target = dir(tmp, "target", 0o700)
        const link = path.join(tmp, "link")
        fs.symlinkSync(target, link)
        assert.isUndefined(PrivateDir.inspect(link, "own"))
        fs.lchownSync(link, NOBODY, NOBODY)
        assert.strictEqual(PrivateDir.inspect(link, "own")?.path, link)
        // And one of mine to theirs: what it leads to is judged.
        const toTheirs = path.join(tmp, "to-theirs")
        fs.symlinkSync(theirs, toTheirs)
        assert.strictEqual(PrivateDir.inspect(toTheirs, "own")?.path, theirs)
      })
  )

  it.scoped.skipIf(!isRoot)(
    "a group-writable root passes only when shared with the user's group on purpose",
    () =>
      Effect.gen(function*() {
        const tmp = yield* tempDir("kiln-private-dir-")
        // setgid, group-writable, of a group root is in (its own, 0), another member's: a team's store.
        const team = dir(tmp, "team", 0o2770, { uid: NOBODY, gid: 0 })
        assert.isUndefined(PrivateDir.inspect(team, "group"))
        // The same for a sandbox root, which is never shared: another user's.
        assert.strictEqual(PrivateDir.inspect(team, "own")?.problem, "is another user's (kiln runs as uid 0)")
        // Not setgid: no sign it is shared on purpose, and another's.
        assert.isDefined(PrivateDir.inspect(dir(tmp, "plain", 0o770, { uid: NOBODY, gid: 0 }), "group"))
        // A group root is not in: its members may write it.
        const foreign = dir(tmp, "foreign-group", 0o2770, { uid: 0, gid: OTHER_GROUP })
        assert.match(PrivateDir.inspect(foreign, "group")!.problem, /^is writable by group 65534/)
        assert.isDefined(PrivateDir.inspect(dir(tmp, "g-w", 0o770, { uid: 0, gid: OTHER_GROUP }), "group"))
        // Shared with the group and with everyone: refused.
        assert.strictEqual(
          PrivateDir.inspect(dir(tmp, "team-and-all", 0o2777, { uid: NOBODY, gid: 0 }), "group")?.problem,
          "is writable by every user"
        )
        // Root's own group (named after it, no other member) is private: group-writable is writable by root alone.
        assert.isUndefined(PrivateDir.inspect(dir(tmp, "upg", 0o775, { uid: 0, gid: 0 }), "own"))
      })
  )
})
