/**
 * `kiln sandboxer`: the sandboxer process's entry point (started by the engine, one per engine process).
 * SIGINT/SIGTERM interrupt it; its scope then closes in reverse: drain in-flight requests (bounded), close the
 * server (the socket file goes), release the store.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { SandboxerRpcs } from "../layers/sandboxer/Rpc.js"
import * as SandboxerServer from "../layers/sandboxer/SandboxerServer.js"
import * as Layout from "../layers/store/Layout.js"
import * as Store from "../layers/store/Store.js"
import * as StoreMaintenance from "../layers/store/StoreMaintenance.js"
import * as Proc from "../os/Proc.js"
import { durationOption, storeOptions } from "./common/cliOptions.js"
import { onInterrupt } from "./common/exitCode.js"
import { cliLogger } from "./common/logging.js"
import { toStoreOptions } from "./common/storeSettings.js"

const duration = (name: string, description: string, fallback: Duration.Duration) =>
  durationOption(name, description).pipe(
    Options.withDefault(Option.some(fallback)),
    Options.map(Option.getOrElse(() => fallback))
  )

export const sandboxer = Command.make(
  "sandboxer",
  {
    socket: Options.text("socket").pipe(Options.withDescription("the Unix socket to listen on")),
    parentPid: Options.integer("parent-pid").pipe(Options.withDescription("exit when this process is gone")),
    parentStartTime: Options.text("parent-start-time").pipe(
      Options.withDescription(
        "the parent's start time (/proc/PID/stat field 22), so a recycled pid is not mistaken for it"
      ),
      Options.optional
    ),
    parentPipe: Options.boolean("parent-pipe").pipe(
      Options.withDescription("stdin is a pipe held by the parent: its end-of-file means the parent died")
    ),
    watchRoots: Options.text("watch-root").pipe(
      Options.withDescription("a sandbox root: the parent's sandboxes there are removed if it dies (repeatable)"),
      Options.repeated
    ),
    idleTimeout: duration("idle-timeout", "exit after this long without a request", Duration.minutes(15)),
    drainTimeout: duration(
      "drain-timeout",
      "how long in-flight requests may finish after SIGTERM",
      Duration.seconds(5)
    ),
    ...storeOptions
  },
  (o) =>
    Effect.gen(function*() {
      onInterrupt.code = 0
      // stdout carries one `ready` line to the parent, which may close the pipe afterwards.
      process.stdout.on("error", () => undefined)
      const parent = {
        parentPid: o.parentPid,
        parentStartTime: Option.getOrElse(Option.filter(o.parentStartTime, (s) => s !== "-"), () => ""),
        idleTimeout: o.idleTimeout
      }
      const state = SandboxerServer.makeState(o.watchRoots)
      // Opened on first use (the engine writes small sandboxes itself and may never need it here), in a scope made
      // before the server's: it closes only after the requests in flight have drained, which may still read it.
      const storeScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
      const storeOptions = toStoreOptions(o)
      const store = yield* Effect.cached(Scope.extend(Store.make(storeOptions), storeScope))
      const storeRoot = Store.defaultOptions(storeOptions).root
      // A store removed since (by its user, or a test's cleanup) holds no slots any more; opening it would make a new,
      // empty store where none should be.
      const clearStaleReaders = Effect.suspend(() =>
        Layout.isMade(storeRoot)
          ? Effect.flatMap(store, (s) => StoreMaintenance.make(s).clearReadersOf(o.parentPid, "2 seconds"))
          : Effect.succeed(0)
      ).pipe(
        Effect.tap((n) => Effect.logInfo(`cleared ${n} stale LMDB reader slot(s) of parent ${o.parentPid}`)),
        Effect.catchAll((e) => Effect.logWarning(`could not clear stale LMDB reader slots: ${e.message}`))
      )
      if (!Proc.ownerAlive({ pid: parent.parentPid, startTime: parent.parentStartTime })) {
        // A post-mortem (the engine's spawner starts one when the engine dies): clean up after it, serve nothing.
        const n = yield* SandboxerServer.destroyOwned(state, {
          pid: parent.parentPid,
          startTime: parent.parentStartTime
        })
        yield* clearStaleReaders
        yield* Effect.logInfo(`parent ${o.parentPid} is gone: removed its ${n} sandbox(es)`)
        yield* Effect.sync(() => fs.rmSync(SandboxerServer.logPathOf(o.socket), { force: true }))
        return
      }
      const handlers = SandboxerServer.handlers(store, state)
      yield* Layer.buildWithScope(
        RpcServer.layer(SandboxerRpcs, { disableTracing: true }).pipe(
          Layer.provide(SandboxerRpcs.toLayer(handlers)),
          Layer.provide(RpcServer.layerProtocolSocketServer),
          Layer.provide(RpcSerialization.layerMsgPack),
          Layer.provide(NodeSocketServer.layer({ path: o.socket }))
        ),
        yield* Effect.scope
      )
      // Added after the server, so it runs before the server closes.
      yield* Effect.addFinalizer(() => SandboxerServer.drain(state, o.drainTimeout))
      yield* Effect.logInfo(`sandboxer ${process.pid} listening on ${o.socket} for parent ${o.parentPid}`)
      yield* Effect.sync(() => process.stdout.write(`ready ${process.pid}\n`))
      const why = yield* SandboxerServer.watch(state, parent, o.parentPipe ? process.stdin : undefined)
      // A killed engine leaves reader slots in the shards it read, and shards are opened on first use: nobody else
      // may open those for a while (a stale slot keeps LMDB from reusing the pages freed after its snapshot).
      if (why === "parent-died") yield* clearStaleReaders
      yield* Effect.logInfo(`exiting: ${why}`)
    }).pipe(
      Effect.scoped,
      // stderr is the log file beside the socket.
      Logger.withMinimumLogLevel(LogLevel.Info),
      Effect.provide(Logger.replace(cliLogger, Logger.withConsoleError(Logger.logfmtLogger)))
    )
).pipe(Command.withDescription("(internal) the sandboxer process: materializes sandboxes for one engine"))
