/**
 * @effect/cli's options, made from option tables (`optionSpec.ts`): the store options every program that opens the
 * store takes, and the helpers kiln's commands build theirs with. The sandboxer gets the store flags from its
 * parent, so that both open the store with identical settings (Pants's sandboxer silently opened defaults).
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Either from "effect/Either"
import * as os from "node:os"
import * as DurationText from "../../domain/DurationText.js"
import * as Size from "../../domain/Size.js"
import * as Store from "../../layers/store/Store.js"
import type { OptionSpec, ValueOf } from "./optionSpec.js"
import { STORE_OPTIONS, type StoreFlags } from "./storeFlags.js"
import { toStoreOptions } from "./storeSettings.js"

const parsedBy = <A>(name: string, parse: (s: string) => Either.Either<A, string>) =>
  Options.mapEffect((s: string) =>
    Either.mapLeft(parse(s), (m) => ValidationError.invalidValue(HelpDoc.p(`--${name}: ${m}`)))
  )

/** A size flag (`512M`, `20G`); a bad value is a usage error naming the flag. */
export const sizeOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDescription(description), parsedBy(name, Size.parse), Options.optional)

/** A duration flag (`90s`, `5m`); a bad value is a usage error naming the flag. */
export const durationOption = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDescription(description), parsedBy(name, DurationText.parse), Options.optional)

const withDefault = <A>(option: Options.Options<A>, fallback: A | undefined): Options.Options<unknown> =>
  fallback === undefined ? Options.optional(option) : Options.withDefault(option, fallback)

const cliOption = (spec: OptionSpec): Options.Options<unknown> => {
  const described = <A>(o: Options.Options<A>) => Options.withDescription(o, spec.description)
  switch (spec.kind) {
    case "file":
      return withDefault(described(Options.file(spec.flag)), spec.default)
    case "directory":
      return withDefault(described(Options.directory(spec.flag)), spec.default)
    case "text":
      return withDefault(described(Options.text(spec.flag)), spec.default)
    case "integer":
      return withDefault(
        described(Options.integer(spec.flag)),
        spec.default === "cpus" ? os.availableParallelism() : spec.default
      )
    case "choice":
      return spec.default === undefined
        ? Options.optional(described(Options.choice(spec.flag, spec.choices)))
        : Options.withDefault(described(Options.choice(spec.flag, spec.choices)), spec.default)
    case "boolean":
      return described(Options.boolean(spec.flag))
    case "size":
      return sizeOption(spec.flag, spec.description)
    case "duration":
      return durationOption(spec.flag, spec.description)
    case "list":
      return Options.repeated(described(Options.text(spec.flag)))
  }
}

/** @effect/cli's options for a table of them, each handing the handler what the table says it gives. */
export const cliOptions = <T extends Record<string, OptionSpec>>(
  table: T
): { readonly [K in keyof T]: Options.Options<ValueOf<T[K]>> } =>
  Object.fromEntries(Object.entries(table).map(([key, spec]) => [key, cliOption(spec)])) as {
    readonly [K in keyof T]: Options.Options<ValueOf<T[K]>>
  }

/** The store flags, as @effect/cli options. */
export const storeOptions = cliOptions(STORE_OPTIONS)

/** The store, opened with the parsed store flags. */
export const storeLayer = (o: StoreFlags) => Store.layer(toStoreOptions(o))
