/**
 * How an option is declared, as plain data, for every program's options: kiln's (`kiln/optionTable.ts`) and the
 * store options the sandboxer shares with it. Nothing here may import @effect/cli or Effect's runtime: the no-op
 * check of a plain `kiln run` loads it before anything else.
 */
import type * as Duration from "effect/Duration"
import type * as Option from "effect/Option"

interface Base {
  /** The flag, without its `--`. */
  readonly flag: string
  readonly description: string
  /** The placeholder of its value in help and errors (`DIGEST`, `NAME=VALUE`), when its kind's is too vague. */
  readonly metavar?: string
}

/** A path or a string; `fast`: a plain `kiln run` with it is read without @effect/cli. */
export interface TextSpec extends Base {
  readonly kind: "file" | "directory" | "text"
  readonly default?: string
  readonly fast: boolean
}

/** A positive integer; `"cpus"`: the default is the CPU count. */
export interface IntegerSpec extends Base {
  readonly kind: "integer"
  readonly default?: number | "cpus"
  readonly fast: boolean
}

/**
 * One of `choices`; `fast`: the values with which a plain `kiln run` is read without @effect/cli. Without a default,
 * an option not given is none (another source decides: kiln.json).
 */
export interface ChoiceSpec extends Base {
  readonly kind: "choice"
  readonly choices: ReadonlyArray<string>
  readonly default?: string
  readonly fast: ReadonlyArray<string>
}

/** A flag without a value. */
export interface BooleanSpec extends Base {
  readonly kind: "boolean"
  readonly fast: boolean
}

/** A text option given any number of times: never read by the direct reader. */
export interface ListSpec extends Base {
  readonly kind: "list"
  readonly fast: false
}

/** A size (`512M`, `20G`) or a duration (`90s`, `2h`): never read by the direct reader. */
export interface ParsedSpec extends Base {
  readonly kind: "size" | "duration"
  readonly fast: false
}

export type OptionSpec = TextSpec | IntegerSpec | ChoiceSpec | BooleanSpec | ParsedSpec | ListSpec

/** What an option gives a command's handler. */
export type ValueOf<S> = S extends
  { readonly kind: "choice"; readonly choices: ReadonlyArray<infer C>; readonly default: string } ? C
  : S extends { readonly kind: "choice"; readonly choices: ReadonlyArray<infer C> } ? Option.Option<C>
  : S extends { readonly kind: "boolean" } ? boolean
  : S extends { readonly kind: "list" } ? ReadonlyArray<string>
  : S extends { readonly kind: "integer"; readonly default: number | "cpus" } ? number
  : S extends { readonly kind: "integer" | "size" } ? Option.Option<number>
  : S extends { readonly kind: "duration" } ? Option.Option<Duration.Duration>
  : S extends { readonly default: string } ? string
  : Option.Option<string>

export type ValuesOf<T extends Record<string, OptionSpec>> = { readonly [K in keyof T]: ValueOf<T[K]> }
