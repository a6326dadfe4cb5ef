/**
 * What a package's files leave out because the workspace's `.gitignore` files ignore it (`gitIgnore.ts`): the
 * entries at the top of a package, judged by the committed `.gitignore` files from the root down, as git judges them.
 * Every doubt keeps a path an input, so the property that matters is checked against git itself on random patterns
 * and trees: whatever kiln leaves out, `git check-ignore` ignores too; and on the patterns real projects write, kiln
 * leaves out exactly what git ignores.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as GitIgnore from "../../src/layers/tasks/internal/gitIgnore.js"
import { settleTimes } from "../utils/temp.js"

/** A tree in a fresh temp directory, given to `use` and then removed. */
const withTree = <A>(files: Record<string, string | null>, use: (root: string) => A): A => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-gitignore-"))
  try {
    for (const [rel, content] of Object.entries(files)) {
      const at = path.join(root, rel)
      if (content === null) {
        fs.mkdirSync(at, { recursive: true })
      } else {
        fs.mkdirSync(path.dirname(at), { recursive: true })
        fs.writeFileSync(at, content)
      }
    }
    return use(root)
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

/** What kiln leaves out at the top of the package directory `dir`. */
const ignoredIn = (root: string, dir: string) => new GitIgnore.Reader(root).ignoredIn(dir)

/** The git that judges: no user's or system's config (a global excludes file would change its answers). */
const GIT_ENV = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" }

/** A repository made once, whose git judges every tree here as its work tree (a `git init` for each costs more). */
let gitDirectory: string | undefined
const gitDir = () => {
  if (gitDirectory === undefined) {
    gitDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-gitignore-git-"))
    const init = spawnSync("git", ["init", "-q", "--bare", gitDirectory], { env: GIT_ENV, encoding: "utf8" })
    assert.strictEqual(init.status, 0, init.stderr)
  }
  return gitDirectory
}
afterAll(() => {
  if (gitDirectory !== undefined) fs.rmSync(gitDirectory, { recursive: true, force: true })
})

/** What git ignores among the entries at the top of `dir`, in the same form. */
const gitIgnoredIn = (root: string, dir: string): Array<string> => {
  const entries = fs.readdirSync(path.join(root, dir), { withFileTypes: true })
  const asked = entries.map((e) => path.posix.join(dir, e.name))
  const checked = spawnSync("git", ["check-ignore", "--no-index", "--stdin", "-z"], {
    cwd: root,
    env: { ...GIT_ENV, GIT_DIR: gitDir(), GIT_WORK_TREE: root },
    input: asked.map((a) => `${a}\0`).join(""),
    encoding: "utf8"
  })
  // 0: some are ignored, 1: none is.
  assert.include([0, 1], checked.status, checked.stderr)
  const ignored = new Set(checked.stdout.split("\0").filter((s) => s !== ""))
  return entries
    .filter((e, i) => ignored.has(asked[i]!))
    .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
    .sort()
}

describe("gitIgnore: the top of a package as the workspace's .gitignore files judge it", () => {
  it("a real root .gitignore's common patterns, and a package's own", () => {
    withTree({
      ".gitignore":
        "# deps\nnode_modules/\ncoverage\n*.log\nnpm-debug.log*\n*.tsbuildinfo\n.turbo\nbuild/\n/top-only\n",
      "packages/web/.gitignore": "/out\n.cache/\n",
      "packages/web/package.json": "{}",
      "packages/web/src/index.ts": "",
      "packages/web/coverage/lcov.info": "",
      "packages/web/debug.log": "",
      "packages/web/npm-debug.log.1": "",
      "packages/web/tsconfig.tsbuildinfo": "",
      "packages/web/.turbo/turbo-build.log": "",
      "packages/web/build": "a file: `build/` names directories only",
      "packages/web/out/x.js": "",
      "packages/web/.cache": "a file: `.cache/` names directories only",
      "packages/web/top-only/x": "",
      "packages/web/node_modules/x/index.js": ""
    }, (root) => {
      const ours = ignoredIn(root, "packages/web")
      assert.deepStrictEqual(ours, [
        ".turbo/",
        "coverage/",
        "debug.log",
        "node_modules/",
        "npm-debug.log.1",
        "out/",
        "tsconfig.tsbuildinfo"
      ])
      assert.deepStrictEqual(ours, gitIgnoredIn(root, "packages/web"))
    })
  })

  it("the last pattern that matches decides, across files: a package's `!` takes back the root's", () => {
    withTree({
      ".gitignore": "*.txt\ndist\n",
      "pkg/.gitignore": "!keep.txt\n",
      "pkg/keep.txt": "",
      "pkg/drop.txt": "",
      "pkg/dist/x": ""
    }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["dist/", "drop.txt"])
      assert.deepStrictEqual(ignoredIn(root, "pkg"), gitIgnoredIn(root, "pkg"))
    })
  })

  it("a `!` it cannot read exactly gives the package up; an ignore it cannot read is skipped", () => {
    withTree({ ".gitignore": "coverage\n!\\#notes\n", "pkg/coverage/x": "", "pkg/#notes": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), [])
    })
    withTree({ ".gitignore": "coverage\n{a,b}.log\n", "pkg/coverage/x": "", "pkg/a.log": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["coverage/"])
    })
    // A pattern wilder than any real one (its expression could take very long on a long name) is not tried.
    const wild = `${"*a".repeat(12)}[b]`
    withTree({ ".gitignore": `coverage\n${wild}\n`, "pkg/coverage/x": "", [`pkg/${"a".repeat(200)}`]: "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["coverage/"])
    })
    withTree({ ".gitignore": `coverage\n!${wild}\n`, "pkg/coverage/x": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), [])
    })
  })

  it("nothing is left out of a package whose directory git ignores, nor by a .gitignore that is a link", () => {
    withTree({ ".gitignore": "legacy/\ncoverage\n", "legacy/pkg/coverage/x": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "legacy/pkg"), [])
    })
    withTree({ "elsewhere/rules": "*\n", "pkg/coverage/x": "", "pkg/a.log": "" }, (root) => {
      fs.symlinkSync(path.join(root, "elsewhere/rules"), path.join(root, ".gitignore"))
      assert.deepStrictEqual(ignoredIn(root, "pkg"), [])
    })
  })

  it("a workspace in a subdirectory of a repository: the .gitignore files above it apply, as they do to git", () => {
    withTree({
      ".git/HEAD": "ref: refs/heads/main\n",
      ".gitignore": "coverage\n",
      "web/.gitignore": "*.log\n",
      "web/pkg/coverage/x": "",
      "web/pkg/debug.log": "",
      "web/pkg/src/a.ts": ""
    }, (root) => {
      const ours = new GitIgnore.Reader(path.join(root, "web")).ignoredIn("pkg")
      assert.deepStrictEqual(ours, ["coverage/", "debug.log"])
      assert.deepStrictEqual(ours, gitIgnoredIn(root, "web/pkg"))
    })
    // A worktree's `.git` is a file; a repository above that ignores everything (a home directory's dotfiles) leaves
    // nothing out, since git would commit nothing of the workspace.
    withTree({ ".git": "gitdir: /elsewhere\n", ".gitignore": "*\n", "web/pkg/coverage/x": "" }, (root) => {
      assert.deepStrictEqual(new GitIgnore.Reader(path.join(root, "web")).ignoredIn("pkg"), [])
    })
  })

  it("a .gitignore with more patterns than any real one has the rest read as unreadable ones are", () => {
    // 1,024 patterns are read; after them an ignoring one is skipped, a re-including one gives the package up.
    const filler = Array.from({ length: 1023 }, (_, i) => `*[${i % 10}]x${i}*`).join("\n")
    withTree({ ".gitignore": `coverage\n${filler}\n*.log\n`, "pkg/coverage/x": "", "pkg/a.log": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["coverage/"])
    })
    withTree({ ".gitignore": `coverage\n${filler}\n!keep\n`, "pkg/coverage/x": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), [])
    })
  })

  it("a .gitignore larger than any real one is not read", () => {
    withTree({ ".gitignore": `coverage\n${"#".repeat(300 * 1024)}\n`, "pkg/coverage/x": "" }, (root) => {
      assert.deepStrictEqual(ignoredIn(root, "pkg"), [])
    })
  })

  it("an answer kept for a standby's next run is given again only while the directory and the rules are unchanged", () => {
    withTree({ ".gitignore": "coverage\n", "pkg/src/a.ts": "", "pkg/coverage/x": "" }, (root) => {
      settleTimes(root)
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["coverage/"])
      // Kept now (nothing changed within a tick): the same answer while nothing changes.
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["coverage/"])
      fs.writeFileSync(path.join(root, "pkg/debug.log"), "")
      fs.appendFileSync(path.join(root, ".gitignore"), "*.log\n")
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["coverage/", "debug.log"])
      // The same size, rewritten in place: the rules are read again.
      fs.writeFileSync(path.join(root, ".gitignore"), "coverag\n*.log\n")
      assert.deepStrictEqual(ignoredIn(root, "pkg"), ["debug.log"])
      fs.rmSync(path.join(root, "pkg/debug.log"))
      assert.deepStrictEqual(ignoredIn(root, "pkg"), [])
    })
  })

  const names = ["a", "b", "a.log", "b.log", "x.txt", "ab", ".hidden", "build"]
  const pattern = fc.oneof(
    fc.constantFrom(...names),
    fc.constantFrom("*.log", "a*", "*b", "?.txt", "[ab]", "*", ".*", "**/a", "**/build", "a/**", "pkg/a", "/a", "*/a"),
    fc.constantFrom("pkg/*.log", "pkg/[ab]*", "p*/x.txt", "\\#a", "{a,b}", "pkg", "pkg/")
  ).chain((p) =>
    fc.tuple(fc.boolean(), fc.boolean()).map(([negated, directoryOnly]) =>
      `${negated ? "!" : ""}${p}${directoryOnly && !p.endsWith("/") ? "/" : ""}`
    )
  )
  const rules = fc.array(pattern, { maxLength: 6 }).map((ps) => ps.join("\n"))

  it.prop(
    "whatever kiln leaves out, git ignores too",
    [rules, rules, fc.subarray(names, { minLength: 1 }), fc.subarray(names)],
    ([rootRules, packageRules, files, directories]) => {
      const tree: Record<string, string | null> = { ".gitignore": rootRules, "pkg/.gitignore": packageRules }
      for (const f of files) tree[`pkg/${f}`] = ""
      for (const d of directories) if (!files.includes(d)) tree[`pkg/${d}/x`] = ""
      withTree(tree, (root) => {
        const git = gitIgnoredIn(root, "pkg")
        const ours = ignoredIn(root, "pkg")
        const rules = `root .gitignore: ${JSON.stringify(rootRules)}; pkg/.gitignore: ${JSON.stringify(packageRules)}`
        for (const o of ours) assert.include(git, o, `kiln leaves out ${o}, git does not ignore it (${rules})`)
        // And no less than git, where it can read every pattern and git does not ignore the package itself.
        if (!/[\\{]/.test(rootRules + packageRules) && !gitIgnoredIn(root, "").includes("pkg/")) {
          assert.deepStrictEqual(ours, git, rules)
        }
      })
    },
    { fastCheck: { numRuns: 300 }, timeout: 120_000 }
  )
})
