import effect from "@effect/eslint-plugin"
import tseslint from "typescript-eslint"

// Imports in src/ that cost start-up time: forbidden everywhere in src/.
const barrels = [
  ...["@effect/platform-node", "@effect/platform", "@effect/cli"].map((name) => ({
    name,
    message: "Use deep imports (@effect/cli/Command): a barrel import costs start-up time."
  })),
  {
    name: "effect",
    message: "Use `import * as Effect from \"effect/Effect\"`: a name from the barrel is a whole namespace " +
      "object to esbuild, which then keeps every export of its module (the bundle was 20% larger)."
  }
]

// The layering of src/ (docs/architecture.md, "Layout and visibility"): domain ← os ← layers ← programs, each
// importing only those before it, and a folder's `internal/` imported only from inside that folder. A relative
// import climbs `../` and then names a folder; these patterns match where it lands.
const CONCERNS = [
  "store",
  "sandbox",
  "sandboxer",
  "spawner",
  "runner",
  "remote",
  "workspace",
  "tasks",
  "engine",
  "lifetime",
  "kiln"
]
const above = (folders, message) => ({ regex: `^(\\.\\./)+(${folders.join("|")})(/|$)`, message })
const internalOf = (except, message) => ({
  regex: `^(\\.\\./)+(layers/)?${except === undefined ? "" : `(?!${except}/)`}[A-Za-z]+/internal(/|$)`,
  message
})
const restricted = (files, patterns) => ({
  files,
  rules: { "no-restricted-imports": ["error", { paths: barrels, patterns }] }
})
const INTERNAL = "Another folder's internal/ is private to it: import its public module (docs/architecture.md)."
const layering = [
  restricted(["src/**/*.ts"], []),
  restricted(["src/domain/**/*.ts"], [
    above(["os", "layers", "programs"], "src/domain is pure data: it imports nothing of os/, layers/ or programs/."),
    internalOf("domain", INTERNAL)
  ]),
  restricted(["src/os/**/*.ts"], [
    above(["layers", "programs"], "src/os imports only src/domain: the layers and programs are built on it."),
    internalOf(undefined, INTERNAL)
  ]),
  ...CONCERNS.map((concern) =>
    restricted([`src/layers/${concern}/**/*.ts`], [
      above(["programs"], "Programs import layers, never the reverse: move what both need into a layer."),
      internalOf(concern, INTERNAL)
    ])
  ),
  restricted(["src/programs/**/*.ts", "src/index.ts"], [
    { regex: "(^|/)(layers/[A-Za-z]+|domain)/internal(/|$)", message: INTERNAL }
  ])
]

export default tseslint.config(
  // What builds write (kiln's and the example workspace's outputs, as .gitignore lists them): not sources.
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      ".kiln-test/**",
      ".kiln-store/**",
      "examples/workspace/{gen,build,dist}/**"
    ]
  },
  ...tseslint.configs.recommended,
  ...effect.configs.dprint,
  {
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      "@typescript-eslint/array-type": ["error", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-empty-object-type": "off"
    }
  },
  ...layering,
  // Effect's Semaphore (3.22) wakes every waiter on each release: with hundreds of processes queued for a few slots,
  // the work and the garbage grow with the square of the queue. domain/Permits.ts hands a permit to one waiter.
  {
    files: ["src/**/*.ts"],
    rules: {
      "no-restricted-properties": [
        "error",
        ...["makeSemaphore", "unsafeMakeSemaphore"].map((property) => ({
          object: "Effect",
          property,
          message: "Use domain/Permits.ts: Effect's Semaphore wakes every waiter on each release."
        }))
      ]
    }
  }
)
