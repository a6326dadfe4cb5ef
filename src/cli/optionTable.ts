/**
 * The options of `kiln run` (and the store and sandbox options other commands share), declared once, as plain data:
 * the run memo's check and the direct reader of a plain `kiln run` (`noop.ts`, `runDirect.ts`) read arguments with
 * it before anything else is loaded, and `globalOptions.ts` turns it into @effect/cli's options, whose help is
 * `kiln run --help`. Nothing here may import @effect/cli or Effect's runtime: the no-op check loads this module.
 */
import type * as Duration from "effect/Duration"
import type * as Option from "effect/Option"

interface Base {
  /** The flag, without its `--`. */
  readonly flag: string
  readonly description: string
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

/** One of `choices`; `fast`: the values with which a plain `kiln run` is read without @effect/cli. */
export interface ChoiceSpec extends Base {
  readonly kind: "choice"
  readonly choices: ReadonlyArray<string>
  readonly default: string
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
export type ValueOf<S> = S extends { readonly kind: "choice"; readonly choices: ReadonlyArray<infer C> } ? C
  : S extends { readonly kind: "boolean" } ? boolean
  : S extends { readonly kind: "list" } ? ReadonlyArray<string>
  : S extends { readonly kind: "integer"; readonly default: number | "cpus" } ? number
  : S extends { readonly kind: "integer" | "size" } ? Option.Option<number>
  : S extends { readonly kind: "duration" } ? Option.Option<Duration.Duration>
  : S extends { readonly default: string } ? string
  : Option.Option<string>

export type ValuesOf<T extends Record<string, OptionSpec>> = { readonly [K in keyof T]: ValueOf<T[K]> }

/** Options every command that opens the store takes (the sandboxer is passed its parent's). */
export const STORE_OPTIONS = {
  storeDir: {
    kind: "directory",
    flag: "store-dir",
    description:
      "the store's root (default: $KILN_STORE_DIR, else $XDG_CACHE_HOME/kiln/store, else ~/.cache/kiln/store)",
    fast: true
  },
  storeShards: {
    kind: "integer",
    flag: "store-shards",
    description:
      "shards per store, a power of two; fixed when the store is created (default: the store's own, 4 for a new one)",
    fast: false
  },
  storeMaxReaders: {
    kind: "integer",
    flag: "store-max-readers",
    description: "LMDB reader slots per shard; every process on a store must agree (default 4096)",
    fast: false
  },
  storeMaxSize: {
    kind: "size",
    flag: "store-max-size",
    description: "the size `gc` shrinks the store to by default (default 20G)",
    fast: false
  },
  storeFilesMapSize: {
    kind: "size",
    flag: "store-files-map-size",
    description: "LMDB map size per file shard (address space, not disk)",
    fast: false
  },
  storeDirectoriesMapSize: {
    kind: "size",
    flag: "store-directories-map-size",
    description: "LMDB map size per directory shard",
    fast: false
  },
  storeActionsMapSize: {
    kind: "size",
    flag: "store-actions-map-size",
    description: "LMDB map size per action-cache shard",
    fast: false
  },
  storeLeaseTime: {
    kind: "duration",
    flag: "store-lease-time",
    description: "how long entries a run stores or uses are protected from gc (default 2h)",
    fast: false
  }
} as const satisfies Record<string, OptionSpec>

/** Where sandboxes are made and what is kept of them: `run`, `exec` and `clean`. */
export const SANDBOX_OPTIONS = {
  keepSandboxes: {
    kind: "choice",
    flag: "keep-sandboxes",
    choices: ["never", "on-failure", "always"],
    default: "never",
    description: "keep sandboxes for debugging (each holds a __run.sh that re-runs its process)",
    fast: ["never", "on-failure", "always"]
  },
  sandboxRoot: {
    kind: "directory",
    flag: "sandbox-root",
    description: "where sandboxes are made (default: $KILN_SANDBOX_ROOT, else ~/.cache/kiln/sandboxes, made 0700)",
    fast: true
  },
  namedCachesDir: {
    kind: "directory",
    flag: "named-caches-dir",
    description: "where named caches live (default: $XDG_CACHE_HOME/kiln/named_caches)",
    fast: true
  }
} as const satisfies Record<string, OptionSpec>

/**
 * The remote cache's options: `run`, `exec` and `kiln remote`. None is read by the direct reader (a run with one goes
 * through @effect/cli); `KILN_REMOTE_CACHE` and kiln.json's `"remote"` give the same settings, these winning.
 */
export const REMOTE_OPTIONS = {
  remoteCache: {
    kind: "text",
    flag: "remote-cache",
    description: "a remote cache: grpc://host:port, grpcs://host:port (TLS), or http(s)://host:port[/prefix] " +
      "(Bazel's HTTP cache); default $KILN_REMOTE_CACHE, else kiln.json's remote.cache",
    fast: false
  },
  remoteExecutor: {
    kind: "text",
    flag: "remote-executor",
    description:
      "a REAPI executor to run processes on (grpc:// or grpcs://; its CAS and action cache are the cache); " +
      "default $KILN_REMOTE_EXECUTOR, else kiln.json's remote.executor",
    fast: false
  },
  remoteJobs: {
    kind: "integer",
    flag: "remote-jobs",
    description: "processes in flight on the executor at once (default 50; --concurrency bounds local ones)",
    fast: false
  },
  remoteFallback: {
    kind: "text",
    flag: "remote-fallback",
    description: "on (the default): a process the executor cannot take runs locally; off: it fails",
    fast: false
  },
  remoteInstanceName: {
    kind: "text",
    flag: "remote-instance-name",
    description: "the REAPI instance name",
    fast: false
  },
  remoteHeader: {
    kind: "list",
    flag: "remote-header",
    description: "NAME=VALUE sent with every remote call (repeatable); a VALUE $VAR is read from the environment",
    fast: false
  },
  remoteCa: { kind: "file", flag: "remote-ca", description: "a CA certificate (PEM) for grpcs/https", fast: false },
  remoteClientCert: {
    kind: "file",
    flag: "remote-client-cert",
    description: "a client certificate (PEM), for mTLS",
    fast: false
  },
  remoteClientKey: {
    kind: "file",
    flag: "remote-client-key",
    description: "the client certificate's key (PEM)",
    fast: false
  },
  remoteCacheMode: {
    kind: "text",
    flag: "remote-cache-mode",
    description: "read-write (the default), read or write",
    fast: false
  },
  remoteRequired: {
    kind: "boolean",
    flag: "remote-required",
    description: "an unreachable or failing remote fails the run (exit 1), instead of a warning and a local run",
    fast: false
  },
  remoteTimeout: {
    kind: "duration",
    flag: "remote-timeout",
    description:
      "the longest a remote transfer, or a remote execution's stream, may go without news (default 60s; lookups get at most 2s)",
    fast: false
  },
  remoteLog: {
    kind: "file",
    flag: "remote-log",
    description: "append one JSON line per remote call (method, digest, bytes, status, ms) to this file",
    fast: false
  },
  cacheNamespace: {
    kind: "text",
    flag: "cache-namespace",
    description: "a namespace for cached results (REAPI Action.salt; default kiln.json's cacheNamespace)",
    fast: false
  }
} as const satisfies Record<string, OptionSpec>

/** `kiln run`'s options, in the order its help lists them. */
export const RUN_OPTIONS = {
  config: {
    kind: "file",
    flag: "config",
    default: "kiln.json",
    description: "the workspace's kiln.json (default: ./kiln.json); the workspace is its directory",
    fast: true
  },
  concurrency: {
    kind: "integer",
    flag: "concurrency",
    default: "cpus",
    description: "processes at once (default: the CPU count)",
    fast: true
  },
  cache: {
    kind: "choice",
    flag: "cache",
    choices: ["read-write", "read", "write", "off"],
    default: "read-write",
    description: "use the action cache to read hits, write results, both (the default) or neither",
    // `write` and `off` mean every process runs: the run memo cannot answer them.
    fast: ["read-write", "read"]
  },
  cacheContent: {
    kind: "choice",
    flag: "cache-content",
    choices: ["fetch", "validate", "defer"],
    default: "validate",
    description:
      "how a cache hit's bytes are checked (defer leaves missing bytes to backtracking; with an executor that is the cache, only the requested processes' outputs come back)",
    // `fetch` asks for the bytes of every hit.
    fast: ["validate", "defer"]
  },
  keepGoing: {
    kind: "boolean",
    flag: "keep-going",
    description: "after a failure, go on with everything that does not depend on it",
    fast: true
  },
  maxBacktracks: {
    kind: "integer",
    flag: "max-backtracks",
    default: 3,
    description: "how many times a run re-runs producers of bytes gone from the store (default 3)",
    fast: true
  },
  trace: {
    kind: "file",
    flag: "trace",
    description: "write a Chrome trace-event JSON (for Perfetto)",
    fast: false
  },
  summary: { kind: "file", flag: "summary", description: "write a JSON summary of the run", fast: true },
  progress: {
    kind: "choice",
    flag: "progress",
    choices: ["auto", "tty", "plain", "none"],
    default: "auto",
    description: "a status line (tty), a line per process (plain), or nothing but failures (none); auto: by stderr",
    fast: ["auto", "tty", "plain", "none"]
  },
  keepSandboxes: SANDBOX_OPTIONS.keepSandboxes,
  reuseSandboxes: {
    kind: "choice",
    flag: "reuse-sandboxes",
    choices: ["on", "off"],
    default: "on",
    description: "on: a finished sandbox is refilled for the next process, made to hold exactly its inputs; off: " +
      "every process gets an empty one",
    fast: ["on", "off"]
  },
  sandboxRoot: SANDBOX_OPTIONS.sandboxRoot,
  namedCachesDir: SANDBOX_OPTIONS.namedCachesDir,
  ...REMOTE_OPTIONS,
  ...STORE_OPTIONS
} as const satisfies Record<string, OptionSpec>
