/**
 * The two spawner programs the tests run side by side (the native one and the Node one, as the build puts them in
 * `.kiln-test/`), and a way to make the engine pick one.
 */
import { Effect } from "effect"
import * as path from "node:path"
import { PROGRAM_ENV } from "../../src/layers/spawner/Warm.js"

/** Both spawners: `node` says whether the program is started by Node. */
export const programs = [
  { name: "native", program: path.resolve(".kiln-test/kiln-spawner"), node: false },
  { name: "Node", program: path.resolve(".kiln-test/spawner.cjs"), node: true }
] as const

/** One of {@link programs}. */
export type Program = (typeof programs)[number]

/** Runs `f` with KILN_SPAWNER naming `program`, as the engine would find it. */
export const withProgram = <A, E, R>(program: string, f: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const saved = process.env[PROGRAM_ENV]
      process.env[PROGRAM_ENV] = program
      return saved
    }),
    () => f,
    (saved) => Effect.sync(() => void (process.env[PROGRAM_ENV] = saved))
  )
