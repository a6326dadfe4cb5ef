/**
 * The options of `kiln run` (and the store and sandbox options other commands share), declared once, as plain data:
 * the run memo's check and the direct reader of a plain `kiln run` (`noop.ts`, `runDirect.ts`) read arguments with
 * it before anything else is loaded, and `globalOptions.ts` turns it into @effect/cli's options, whose help is
 * `kiln run --help`. Nothing here may import @effect/cli or Effect's runtime: the no-op check loads this module.
 */
import { type OptionSpec } from "../common/optionSpec.js"
import { STORE_OPTIONS } from "../common/storeFlags.js"

/**
 * What a bare `--affected` is read as: the default base. Not a ref git can have (a ref holds no `:`); @effect/cli
 * reads an empty `--affected=` as a word, not a value.
 */
export const AFFECTED_DEFAULT = ":default"

/**
 * The arguments with a bare `--affected` (before any `--`) given {@link AFFECTED_DEFAULT}: its REF is optional, and
 * only ever given as `--affected=REF`, so that `kiln run --affected build` selects `build` among the affected ones.
 */
export const affectedArgs = (args: ReadonlyArray<string>): Array<string> => {
  const end = args.indexOf("--")
  return args.map((a, i) => a === "--affected" && (end === -1 || i < end) ? `--affected=${AFFECTED_DEFAULT}` : a)
}

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
 * The remote cache's options: `run`, `exec` and `kiln remote`; `KILN_REMOTE_CACHE` and kiln.json's `"remote"` give the
 * same settings, these winning. The endpoints and `--remote-jobs` are read by the direct reader and the no-op check
 * (which refuses a bad URL as the full run does, `remote/Endpoint.ts`), as the same settings from the environment or
 * kiln.json are: a no-op with `--remote-cache` is answered from the run memo. The rest (values the check cannot judge
 * without the remote's settings, lists, files, durations, and `--remote-required`, which promises that the remote is
 * checked) send the run through @effect/cli.
 */
export const REMOTE_OPTIONS = {
  remoteCache: {
    kind: "text",
    flag: "remote-cache",
    description: "a remote cache: grpc://host:port, grpcs://host:port (TLS), or http(s)://host:port[/prefix] " +
      "(Bazel's HTTP cache); default $KILN_REMOTE_CACHE, else kiln.json's remote.cache",
    fast: true
  },
  remoteExecutor: {
    kind: "text",
    flag: "remote-executor",
    description:
      "a REAPI executor to run processes on (grpc:// or grpcs://; its CAS and action cache are the cache); " +
      "default $KILN_REMOTE_EXECUTOR, else kiln.json's remote.executor",
    fast: true
  },
  remoteJobs: {
    kind: "integer",
    flag: "remote-jobs",
    description: "processes in flight on the executor at once (default 50; --concurrency bounds local ones)",
    fast: true
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
  remoteCorrelationId: {
    kind: "text",
    flag: "remote-correlation-id",
    description:
      "an id sent with every REAPI call as correlated_invocations_id, tying this run to others (a CI job's); " +
      "default $KILN_CORRELATION_ID",
    fast: false
  },
  remoteLog: {
    kind: "file",
    flag: "remote-log",
    description:
      "append one JSON line per remote call (method, digest, bytes, status, when it started, ms) to this file",
    fast: false
  },
  cacheNamespace: {
    kind: "text",
    flag: "cache-namespace",
    description: "a namespace for cached results (REAPI Action.salt; default kiln.json's cacheNamespace)",
    fast: false
  }
} as const satisfies Record<string, OptionSpec>

/**
 * Which processes a command acts on besides its words (see `selection.ts`): `run`, `ls` and `graph`. `--affected`
 * alone is the default base (see `affectedArgs`); a run with it is read by @effect/cli, never by the
 * run memo's check (git decides).
 */
export const SELECTION_OPTIONS = {
  affected: {
    kind: "text",
    flag: "affected",
    description: "only processes whose inputs differ from git's REF (--affected=REF; default: the merge base with " +
      "the default branch), untracked files included, and their dependents",
    fast: false
  }
} as const satisfies Record<string, OptionSpec>

/**
 * How processes are sandboxed (`runner/SandboxMode.ts`): `run` and `exec`. No default here: without it, kiln.json's
 * `"sandbox"` decides, else `auto`. Every value is read by the direct reader: the run memo is kept per mode.
 */
export const SANDBOX_MODE_OPTION = {
  sandbox: {
    kind: "choice",
    flag: "sandbox",
    choices: ["strict", "auto", "off"],
    description: "strict: each process sees only its inputs and the system's directories, and a machine that cannot " +
      "do that refuses to run (exit 2); auto: strict where the machine can, else a warning; off: a sandbox " +
      "directory only (debugging). Default: kiln.json's \"sandbox\", else auto",
    fast: ["strict", "auto", "off"]
  }
} as const satisfies Record<string, OptionSpec>

/** `kiln run`'s options, in the order its help lists them. */
export const RUN_OPTIONS = {
  config: {
    kind: "file",
    flag: "config",
    description:
      "the workspace's kiln.json (default: the nearest kiln.json from here up); the workspace is its directory",
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
  ...SELECTION_OPTIONS,
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
  outputLogs: {
    kind: "choice",
    flag: "output-logs",
    choices: ["full", "errors-only", "new-only", "none"],
    default: "errors-only",
    description: "which processes' output is shown as they finish: every one's, cache hits replayed (full), " +
      "failures' last lines (errors-only), what ran but not hits (new-only), or none (no process's line either: " +
      "only a failure's and its re-run command)",
    // A run the memo answers shows no output but failures', of which it has none; full replays hits' output.
    fast: ["errors-only", "new-only", "none"]
  },
  logOrder: {
    kind: "choice",
    flag: "log-order",
    choices: ["stream", "grouped"],
    default: "stream",
    description: "stream: each line of output prefixed by its process's name (when processes run at once); " +
      "grouped: each process's output whole, under its line",
    fast: ["stream", "grouped"]
  },
  failureLines: {
    kind: "integer",
    flag: "failure-lines",
    default: 20,
    description: "how many of the last lines of a failed process's stdout, and of its stderr, are shown (default 20)",
    fast: true
  },
  quiet: {
    kind: "boolean",
    flag: "quiet",
    description: "no line at the end for a process that wrote files outside its declared outputs",
    fast: true
  },
  ...SANDBOX_MODE_OPTION,
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
