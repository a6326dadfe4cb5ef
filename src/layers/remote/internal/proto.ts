/**
 * The REAPI v2, ByteStream and google.rpc messages kiln sends and receives but never hashes (requests, responses,
 * `ActionResult`), as a protobufjs schema. Hashed messages (`Directory`, `Command`, `Action`, `Tree`) keep kiln's
 * canonical encoder in `domain/`; a test holds every field number and type here to the `.proto` files REAPI
 * publishes (Debian's `bazel-bootstrap-source` copy).
 *
 * @internal
 */
import protobuf from "protobufjs"
import type * as Digest from "../../../domain/Digest.js"

type Fields = Record<string, { type: string; id: number; rule?: "repeated" }>
const f = (
  type: string,
  id: number,
  repeated = false
) => (repeated ? { type, id, rule: "repeated" as const } : { type, id })
const message = (fields: Fields, nested?: Record<string, unknown>) => ({ fields, ...(nested ? { nested } : {}) })

/** The schema as a protobufjs JSON descriptor: exported for the conformance test. @internal */
export const descriptor = {
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: message({ type_url: f("string", 1), value: f("bytes", 2) }),
            Duration: message({ seconds: f("int64", 1), nanos: f("int32", 2) }),
            Timestamp: message({ seconds: f("int64", 1), nanos: f("int32", 2) }),
            Empty: message({})
          }
        },
        longrunning: {
          nested: {
            Operation: message({
              name: f("string", 1),
              metadata: f("google.protobuf.Any", 2),
              done: f("bool", 3),
              error: f("google.rpc.Status", 4),
              response: f("google.protobuf.Any", 5)
            }),
            CancelOperationRequest: message({ name: f("string", 1) })
          }
        },
        rpc: {
          nested: {
            Status: message({
              code: f("int32", 1),
              message: f("string", 2),
              details: f("google.protobuf.Any", 3, true)
            }),
            RetryInfo: message({ retry_delay: f("google.protobuf.Duration", 1) }),
            PreconditionFailure: message({ violations: f("Violation", 1, true) }, {
              Violation: message({ type: f("string", 1), subject: f("string", 2), description: f("string", 3) })
            })
          }
        },
        bytestream: {
          nested: {
            ReadRequest: message({
              resource_name: f("string", 1),
              read_offset: f("int64", 2),
              read_limit: f("int64", 3)
            }),
            ReadResponse: message({ data: f("bytes", 10) }),
            WriteRequest: message({
              resource_name: f("string", 1),
              write_offset: f("int64", 2),
              finish_write: f("bool", 3),
              data: f("bytes", 10)
            }),
            WriteResponse: message({ committed_size: f("int64", 1) }),
            QueryWriteStatusRequest: message({ resource_name: f("string", 1) }),
            QueryWriteStatusResponse: message({ committed_size: f("int64", 1), complete: f("bool", 2) })
          }
        }
      }
    },
    build: {
      nested: {
        bazel: {
          nested: {
            semver: {
              nested: {
                SemVer: message({
                  major: f("int32", 1),
                  minor: f("int32", 2),
                  patch: f("int32", 3),
                  prerelease: f("string", 4)
                })
              }
            },
            remote: {
              nested: {
                execution: {
                  nested: {
                    v2: {
                      nested: {
                        Digest: message({ hash: f("string", 1), size_bytes: f("int64", 2) }),
                        OutputFile: message({
                          path: f("string", 1),
                          digest: f("Digest", 2),
                          is_executable: f("bool", 4),
                          contents: f("bytes", 5)
                        }),
                        OutputSymlink: message({ path: f("string", 1), target: f("string", 2) }),
                        OutputDirectory: message({ path: f("string", 1), tree_digest: f("Digest", 3) }),
                        ExecutedActionMetadata: message({
                          worker: f("string", 1),
                          queued_timestamp: f("google.protobuf.Timestamp", 2),
                          worker_start_timestamp: f("google.protobuf.Timestamp", 3),
                          worker_completed_timestamp: f("google.protobuf.Timestamp", 4),
                          input_fetch_start_timestamp: f("google.protobuf.Timestamp", 5),
                          input_fetch_completed_timestamp: f("google.protobuf.Timestamp", 6),
                          execution_start_timestamp: f("google.protobuf.Timestamp", 7),
                          execution_completed_timestamp: f("google.protobuf.Timestamp", 8),
                          output_upload_start_timestamp: f("google.protobuf.Timestamp", 9),
                          output_upload_completed_timestamp: f("google.protobuf.Timestamp", 10)
                        }),
                        ActionResult: message({
                          output_files: f("OutputFile", 2, true),
                          output_directories: f("OutputDirectory", 3, true),
                          exit_code: f("int32", 4),
                          stdout_raw: f("bytes", 5),
                          stdout_digest: f("Digest", 6),
                          stderr_raw: f("bytes", 7),
                          stderr_digest: f("Digest", 8),
                          execution_metadata: f("ExecutedActionMetadata", 9),
                          output_file_symlinks: f("OutputSymlink", 10, true),
                          output_directory_symlinks: f("OutputSymlink", 11, true)
                        }),
                        GetActionResultRequest: message({
                          instance_name: f("string", 1),
                          action_digest: f("Digest", 2),
                          inline_stdout: f("bool", 3),
                          inline_stderr: f("bool", 4),
                          inline_output_files: f("string", 5, true)
                        }),
                        UpdateActionResultRequest: message({
                          instance_name: f("string", 1),
                          action_digest: f("Digest", 2),
                          action_result: f("ActionResult", 3)
                        }),
                        FindMissingBlobsRequest: message({
                          instance_name: f("string", 1),
                          blob_digests: f("Digest", 2, true)
                        }),
                        FindMissingBlobsResponse: message({ missing_blob_digests: f("Digest", 2, true) }),
                        BatchUpdateBlobsRequest: message({
                          instance_name: f("string", 1),
                          requests: f("Request", 2, true)
                        }, {
                          Request: message({ digest: f("Digest", 1), data: f("bytes", 2) })
                        }),
                        BatchUpdateBlobsResponse: message({ responses: f("Response", 1, true) }, {
                          Response: message({ digest: f("Digest", 1), status: f("google.rpc.Status", 2) })
                        }),
                        BatchReadBlobsRequest: message({
                          instance_name: f("string", 1),
                          digests: f("Digest", 2, true)
                        }),
                        BatchReadBlobsResponse: message({ responses: f("Response", 1, true) }, {
                          Response: message({
                            digest: f("Digest", 1),
                            data: f("bytes", 2),
                            status: f("google.rpc.Status", 3)
                          })
                        }),
                        ExecutionPolicy: message({ priority: f("int32", 1) }),
                        ResultsCachePolicy: message({ priority: f("int32", 1) }),
                        ExecuteRequest: message({
                          instance_name: f("string", 1),
                          skip_cache_lookup: f("bool", 3),
                          action_digest: f("Digest", 6),
                          execution_policy: f("ExecutionPolicy", 7),
                          results_cache_policy: f("ResultsCachePolicy", 8)
                        }),
                        ExecuteResponse: message({
                          result: f("ActionResult", 1),
                          cached_result: f("bool", 2),
                          status: f("google.rpc.Status", 3),
                          message: f("string", 5)
                        }),
                        ExecuteOperationMetadata: message({
                          stage: f("int32", 1),
                          action_digest: f("Digest", 2),
                          stdout_stream_name: f("string", 3),
                          stderr_stream_name: f("string", 4)
                        }),
                        WaitExecutionRequest: message({ name: f("string", 1) }),
                        GetCapabilitiesRequest: message({ instance_name: f("string", 1) }),
                        ActionCacheUpdateCapabilities: message({ update_enabled: f("bool", 1) }),
                        CacheCapabilities: message({
                          digest_function: f("int32", 1, true),
                          action_cache_update_capabilities: f("ActionCacheUpdateCapabilities", 2),
                          max_batch_total_size_bytes: f("int64", 4),
                          symlink_absolute_path_strategy: f("int32", 5)
                        }),
                        ExecutionCapabilities: message({ digest_function: f("int32", 1), exec_enabled: f("bool", 2) }),
                        ServerCapabilities: message({
                          cache_capabilities: f("CacheCapabilities", 1),
                          execution_capabilities: f("ExecutionCapabilities", 2),
                          low_api_version: f("build.bazel.semver.SemVer", 4),
                          high_api_version: f("build.bazel.semver.SemVer", 5)
                        }),
                        ToolDetails: message({ tool_name: f("string", 1), tool_version: f("string", 2) }),
                        RequestMetadata: message({
                          tool_details: f("ToolDetails", 1),
                          action_id: f("string", 2),
                          tool_invocation_id: f("string", 3),
                          correlated_invocations_id: f("string", 4)
                        })
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

const root = protobuf.Root.fromJSON(descriptor as protobuf.INamespace)
const V2 = "build.bazel.remote.execution.v2."

/** Types looked up once: a lookup walks the namespace, and every message a call sends or receives asked again. */
const types = new Map<string, protobuf.Type>()

/** A message type by its short name (`ActionResult`) or full name (`google.rpc.Status`). @internal */
export const type = (name: string): protobuf.Type => {
  let t = types.get(name)
  if (t === undefined) types.set(name, t = root.lookupType(name.includes(".") ? name : V2 + name))
  return t
}

const toObject = { longs: Number, enums: Number, defaults: false, arrays: true } as const

/** @internal */
export const encode = (name: string, value: Record<string, unknown>): Uint8Array => {
  const t = type(name)
  return t.encode(t.fromObject(value)).finish()
}

/** Plain objects, int64s as numbers, absent fields absent (a missing `data` is the empty blob). @internal */
export const decode = <A = any>(name: string, bytes: Uint8Array): A => {
  const t = type(name)
  return t.toObject(t.decode(bytes), toObject) as A
}

/** A REAPI `Digest` as protobufjs objects hold it. @internal */
export interface WireDigest {
  readonly hash?: string
  readonly size_bytes?: number
}

/** @internal */
export const wire = (d: Digest.Digest): WireDigest => ({ hash: d.hash, size_bytes: d.sizeBytes })

/** A received digest, or undefined when it is not one (a server's bad answer is not kiln's crash). @internal */
export const fromWire = (d: WireDigest | undefined): Digest.Digest | undefined => {
  if (d === undefined) return undefined
  const hash = d.hash ?? ""
  const sizeBytes = d.size_bytes ?? 0
  return /^[0-9a-f]{64}$/.test(hash) && Number.isSafeInteger(sizeBytes) && sizeBytes >= 0
    ? { hash, sizeBytes }
    : undefined
}
