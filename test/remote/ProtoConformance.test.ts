/**
 * Holds kiln's wire formats to the `.proto` files REAPI publishes, as Debian's `bazel-bootstrap-source` ships them:
 * the protobufjs descriptor of src/layers/remote/internal/proto.ts field by field, and the bytes of kiln's own canonical
 * encoders (hashed messages) and of proto.ts (the rest) decoded by the real schema. A server reads kiln's bytes with
 * the real schema, so a wrong field number here is a silent loss of data there.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import protobuf from "protobufjs"
import * as Action from "../../src/domain/Action.js"
import * as Digest from "../../src/domain/Digest.js"
import * as Directory from "../../src/domain/Directory.js"
import * as Tree from "../../src/domain/Tree.js"
import * as Proto from "../../src/layers/remote/internal/proto.js"
import { Golden } from "../fixtures/golden.js"

const THIRD_PARTY = "/usr/src/bazel-bootstrap/third_party"
const V2 = "build.bazel.remote.execution.v2."

/** The real protos. Missing sources fail the test: skipping would let the descriptor drift unseen. */
const loadRealSchema = (): protobuf.Root => {
  if (!fs.existsSync(THIRD_PARTY)) {
    throw new Error(
      `${THIRD_PARTY} is missing: install Debian's REAPI sources with \`apt-get install bazel-bootstrap-source\` ` +
        "(CI installs it) to run the protobuf conformance test"
    )
  }
  // Imports are relative to these include roots; the Debian copy has no google/protobuf/descriptor.proto (which
  // google/api/annotations.proto imports), so protobufjs's bundled one stands in. Any, Duration, Timestamp, Empty and
  // wrappers come from protobufjs's built-in `common` files, which are the upstream definitions.
  const includes = [
    path.join(THIRD_PARTY, "remoteapis"),
    path.join(THIRD_PARTY, "googleapis"),
    path.dirname(createRequire(import.meta.url).resolve("protobufjs/package.json"))
  ]
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) =>
    includes.map((dir) => path.join(dir, target)).find((file) => fs.existsSync(file)) ?? target
  root.loadSync([
    "build/bazel/remote/execution/v2/remote_execution.proto",
    "google/bytestream/bytestream.proto",
    "google/rpc/error_details.proto"
  ], { keepCase: true })
  root.resolveAll()
  return root
}

const real = loadRealSchema()
const realType = (name: string) => real.lookupType(name.includes(".") ? name : V2 + name)
const plain = { longs: Number, enums: Number, defaults: false } as const

/** Decodes with the real schema into plain objects (int64 as numbers, bytes as plain Uint8Arrays, defaults absent). */
const decodeReal = (name: string, bytes: Uint8Array): any => {
  const t = realType(name)
  // A plain copy: protobufjs hands back Buffer slices of a Buffer, and a Buffer never equals a Uint8Array.
  return t.toObject(t.decode(new Uint8Array(bytes)), plain)
}
const utf8 = (text: string) => new TextEncoder().encode(text)

/**
 * The real schema's own encoding of what it decoded, built from a plain object with every default written out: equal
 * bytes mean kiln's bytes are the canonical ones (field-number order, defaults omitted), not merely readable.
 */
const reencodeReal = (name: string, bytes: Uint8Array): Uint8Array => {
  const t = realType(name)
  const everything = t.toObject(t.decode(bytes), { ...plain, defaults: true })
  return t.encode(t.fromObject(everything)).finish()
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")
const allTypes = (ns: protobuf.NamespaceBase): Array<protobuf.Type> =>
  ns.nestedArray.flatMap((n) => [
    ...(n instanceof protobuf.Type ? [n] : []),
    ...(n instanceof protobuf.Namespace || n instanceof protobuf.Type ? allTypes(n) : [])
  ])

/** A field's type as a comparable name: the resolved full name of a message or enum, else the scalar. */
const typeName = (field: protobuf.Field) => {
  if (field.resolvedType instanceof protobuf.Enum) return `enum ${field.resolvedType.fullName}`
  return field.resolvedType?.fullName ?? field.type
}

describe("kiln's protobuf schema against the REAPI .proto files", () => {
  it("every field kiln declares has the real name, number, type and repeatedness", () => {
    const kiln = protobuf.Root.fromJSON(Proto.descriptor as protobuf.INamespace).resolveAll()
    const mismatches: Array<string> = []
    const types = allTypes(kiln)
    for (const kilnType of types) {
      const name = kilnType.fullName.slice(1)
      const realMsg = real.lookup(name)
      if (!(realMsg instanceof protobuf.Type)) {
        mismatches.push(`${name}: no such message in the real protos`)
        continue
      }
      for (const field of kilnType.fieldsArray) {
        const theirs = realMsg.fields[field.name]
        const at = `${name}.${field.name}`
        if (theirs === undefined) {
          mismatches.push(`${at}: no such field in the real message`)
          continue
        }
        if (theirs.id !== field.id) mismatches.push(`${at}: kiln id ${field.id}, real id ${theirs.id}`)
        // kiln declares enum fields (digest_function, symlink_absolute_path_strategy) as int32: an enum's wire
        // form is an int32 varint, and kiln reads the number without the enum's names.
        const enumAsInt32 = field.type === "int32" && theirs.resolvedType instanceof protobuf.Enum
        if (!enumAsInt32 && typeName(field) !== typeName(theirs)) {
          mismatches.push(`${at}: kiln type ${typeName(field)}, real type ${typeName(theirs)}`)
        }
        if (field.repeated !== theirs.repeated) {
          mismatches.push(`${at}: kiln repeated=${field.repeated}, real repeated=${theirs.repeated}`)
        } else if (field.repeated && field.packed !== theirs.packed) {
          // Packed or not changes the bytes of a repeated scalar (proto3 packs them; a proto2 descriptor would not).
          mismatches.push(`${at}: kiln packed=${field.packed}, real packed=${theirs.packed}`)
        }
      }
    }
    expect(types.length).toBeGreaterThan(30)
    expect(mismatches, mismatches.join("\n")).toEqual([])
  })
})

describe("kiln's hashed messages decoded by the real schema", () => {
  const inTxt = Digest.ofBytes(Buffer.from("some input text\n"))
  const aSh = Digest.ofBytes(Buffer.from("echo hi\n"))
  const golden = (text: string) => Either.getOrThrow(Digest.parse(text))
  const wire = (d: Digest.Digest) => ({ hash: d.hash, size_bytes: d.sizeBytes })

  it("the golden CMD and ACT: the real schema's encoding has the golden digests", () => {
    const command = Action.encodeCommand({
      arguments: ["/bin/sh", "-c", "cat src/in.txt > out.txt"],
      environmentVariables: { PATH: "/usr/bin:/bin" },
      outputFiles: ["out.txt"]
    })
    expect(Digest.format(Digest.ofBytes(reencodeReal("Command", command)))).toBe(Golden.cmd)
    // Built from the field values alone, so the digest is the real schema's, with kiln's encoder out of the loop.
    const t = realType("Action")
    const goldenAction = { command_digest: wire(golden(Golden.cmd)), input_root_digest: wire(golden(Golden.v4)) }
    const action = t.encode(t.fromObject(goldenAction)).finish()
    expect(Digest.format(Digest.ofBytes(action))).toBe(Golden.act)
  })

  it("Action: timeout, do_not_cache, salt and a sorted platform", () => {
    const bytes = Action.encodeAction({
      commandDigest: golden(Golden.cmd),
      inputRootDigest: golden(Golden.v4),
      timeoutMs: 1500,
      doNotCache: true,
      salt: new Uint8Array([0, 1, 255]),
      platform: { properties: [{ name: "OSFamily", value: "linux" }, { name: "ISA", value: "x86-64" }] }
    })
    expect(decodeReal("Action", bytes)).toEqual({
      command_digest: wire(golden(Golden.cmd)),
      input_root_digest: wire(golden(Golden.v4)),
      timeout: { seconds: 1, nanos: 500_000_000 },
      do_not_cache: true,
      salt: new Uint8Array([0, 1, 255]),
      platform: { properties: [{ name: "ISA", value: "x86-64" }, { name: "OSFamily", value: "linux" }] }
    })
    expect(hex(reencodeReal("Action", bytes))).toBe(hex(bytes))
  })

  it("Command: arguments, sorted environment, outputs, working directory", () => {
    const bytes = Action.encodeCommand({
      arguments: ["/bin/sh", "-c", "make"],
      environmentVariables: { PATH: "/bin", HOME: "/root", LANG: "C" },
      outputFiles: ["out/b.o", "out/a.o"],
      outputDirectories: ["gen"],
      workingDirectory: "pkg"
    })
    expect(decodeReal("Command", bytes)).toEqual({
      arguments: ["/bin/sh", "-c", "make"],
      environment_variables: [
        { name: "HOME", value: "/root" },
        { name: "LANG", value: "C" },
        { name: "PATH", value: "/bin" }
      ],
      output_files: ["out/a.o", "out/b.o"],
      output_directories: ["gen"],
      working_directory: "pkg"
    })
    expect(hex(reencodeReal("Command", bytes))).toBe(hex(bytes))
  })

  it("Directory: executable and plain files, directories, symlinks", () => {
    const v4 = golden(Golden.v4)
    // Given unsorted: make sorts, and the real decoder must see them in name order.
    const dir = Either.getOrThrow(Directory.make({
      files: [
        { name: "in.txt", digest: inTxt, isExecutable: false },
        { name: "a.sh", digest: aSh, isExecutable: true }
      ],
      directories: [{ name: "src", digest: v4 }, { name: "empty", digest: Digest.empty }],
      symlinks: [{ name: "link", target: "src/in.txt" }]
    }))
    const bytes = Directory.encode(dir)
    expect(decodeReal("Directory", bytes)).toEqual({
      files: [{ name: "a.sh", digest: wire(aSh), is_executable: true }, { name: "in.txt", digest: wire(inTxt) }],
      // The empty digest's size_bytes is 0, a default, so absent on the wire.
      directories: [{ name: "empty", digest: { hash: Digest.empty.hash } }, { name: "src", digest: wire(v4) }],
      symlinks: [{ name: "link", target: "src/in.txt" }]
    })
    expect(hex(reencodeReal("Directory", bytes))).toBe(hex(bytes))
    const goldenV4 = reencodeReal("Directory", Directory.encode(Golden.v4Directory()))
    expect(Digest.format(Digest.ofBytes(goldenV4))).toBe(Golden.v4)
  })

  it("Tree: the root and each child", () => {
    const v2 = Either.getOrThrow(Directory.make({ files: [{ name: "in.txt", digest: inTxt, isExecutable: false }] }))
    const tree: Tree.Tree = { root: Golden.v4Directory(), children: new Map([[Directory.digestOf(v2).hash, v2]]) }
    const bytes = Tree.encode(tree)
    expect(decodeReal("Tree", bytes)).toEqual({
      root: {
        files: [{ name: "a.sh", digest: wire(aSh), is_executable: true }],
        directories: [{ name: "src", digest: wire(golden(Golden.v2)) }],
        symlinks: [{ name: "link", target: "src/in.txt" }]
      },
      children: [{ files: [{ name: "in.txt", digest: wire(inTxt) }] }]
    })
    expect(hex(reencodeReal("Tree", bytes))).toBe(hex(bytes))
  })
})

describe("proto.ts's encodings decoded by the real schema", () => {
  const d = (text: string) => Proto.wire(Digest.ofBytes(Buffer.from(text)))
  /** kiln's bytes for a message, read back by the real type of the same name, must give the same values. */
  const roundTrip = (name: string, value: Record<string, unknown>) =>
    expect(decodeReal(name, Proto.encode(name, value))).toEqual(value)

  it("ActionResult, as results.ts's toRemote builds it", () => {
    roundTrip("ActionResult", {
      output_files: [{ path: "out/tool", digest: d("tool"), is_executable: true }, { path: "out/a.o", digest: d("a") }],
      output_directories: [{ path: "gen", tree_digest: d("tree") }],
      exit_code: 3,
      stdout_digest: d("stdout"),
      stderr_digest: d("stderr"),
      output_file_symlinks: [{ path: "out/link", target: "a.o" }],
      output_directory_symlinks: [{ path: "gen2", target: "gen" }]
    })
  })

  it("RequestMetadata, FindMissingBlobsRequest, BatchUpdateBlobsRequest, ByteStream WriteRequest", () => {
    roundTrip("RequestMetadata", {
      tool_details: { tool_name: "kiln", tool_version: "0.1.0" },
      action_id: "act",
      tool_invocation_id: "inv",
      correlated_invocations_id: "corr"
    })
    roundTrip("FindMissingBlobsRequest", { instance_name: "main", blob_digests: [d("a"), d("b")] })
    roundTrip("BatchUpdateBlobsRequest", {
      instance_name: "main",
      requests: [{ digest: d("a"), data: utf8("a") }, { digest: d("b"), data: utf8("b") }]
    })
    roundTrip("google.bytestream.WriteRequest", {
      resource_name: `main/uploads/0f4d/blobs/${Digest.ofBytes(Buffer.from("blob")).hash}/4`,
      write_offset: 4096,
      finish_write: true,
      data: utf8("blob")
    })
  })
})
