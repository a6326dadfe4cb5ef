/**
 * A minimal protobuf wire-format writer and a strict reader, enough for the REAPI messages kiln hashes.
 * Canonical form is the writer's job (callers emit fields in number order and skip defaults); the reader only
 * tokenizes and refuses anything a canonical writer would never produce (non-minimal varints, wrong wire types).
 *
 * @internal
 */

import type * as Digest from "../Digest.js"

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: true })

/**
 * The UTF-8 length of `s` as `TextEncoder` writes it: a lone surrogate becomes U+FFFD, 3 bytes.
 */
const utf8Length = (s: string): number => {
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const next = s.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        n += 4
        i++
      } else n += 3
    } else n += 3
  }
  return n
}

/**
 * Writers for nested messages, one per depth, reused: a message is written into the one of its depth, then copied
 * into its parent. (A writer each, with its own buffer, made encoding a small directory mostly allocation, and every
 * process encodes several.)
 */
const nested: Array<Writer> = []
let depth = 0

/** @internal */
export class Writer {
  private buf: Uint8Array
  private len = 0

  constructor(size = 256) {
    this.buf = new Uint8Array(size)
  }

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < this.len + n) size *= 2
    const next = new Uint8Array(size)
    next.set(this.buf.subarray(0, this.len))
    this.buf = next
  }

  varint(value: number): this {
    // Sizes fit in 2^53; division keeps precision where bit operators would truncate to 32 bits.
    this.reserve(10)
    let v = value
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80
      v = Math.floor(v / 0x80)
    }
    this.buf[this.len++] = v
    return this
  }

  tag(field: number, wireType: 0 | 2): this {
    return this.varint(field * 8 + wireType)
  }

  bytesField(field: number, bytes: Uint8Array): this {
    this.tag(field, 2).varint(bytes.length)
    this.reserve(bytes.length)
    this.buf.set(bytes, this.len)
    this.len += bytes.length
    return this
  }

  stringField(field: number, value: string): this {
    const n = utf8Length(value)
    this.tag(field, 2).varint(n)
    this.reserve(n)
    const { written } = textEncoder.encodeInto(value, this.buf.subarray(this.len, this.len + n))
    if (written !== n) throw new Error(`protobuf: ${written} UTF-8 bytes written where ${n} were counted`)
    this.len += n
    return this
  }

  varintField(field: number, value: number): this {
    return this.tag(field, 0).varint(value)
  }

  messageField(field: number, write: (w: Writer) => void): this {
    const inner = nested[depth] ??= new Writer()
    inner.len = 0
    depth++
    try {
      write(inner)
    } finally {
      depth--
    }
    // A view, not a copy: it is copied here, before the writer of this depth is used again.
    return this.bytesField(field, inner.buf.subarray(0, inner.len))
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len)
  }
}

/** @internal */
export type Field =
  | { readonly field: number; readonly wireType: 0; readonly value: number }
  | { readonly field: number; readonly wireType: 2; readonly bytes: Uint8Array }

/** @internal */
export class WireError extends Error {}

const readVarint = (bytes: Uint8Array, start: number): [number, number] => {
  let value = 0
  let scale = 1
  let pos = start
  for (;;) {
    if (pos >= bytes.length) throw new WireError("truncated varint")
    const b = bytes[pos++]!
    value += (b & 0x7f) * scale
    if (b < 0x80) {
      if (b === 0 && pos - start > 1) throw new WireError("non-minimal varint")
      if (!Number.isSafeInteger(value)) throw new WireError("varint out of range")
      return [value, pos]
    }
    scale *= 0x80
    if (pos - start >= 10) throw new WireError("varint too long")
  }
}

/** @internal */
export const readFields = (bytes: Uint8Array): Array<Field> => {
  const fields: Array<Field> = []
  let pos = 0
  while (pos < bytes.length) {
    const [key, afterKey] = readVarint(bytes, pos)
    const field = Math.floor(key / 8)
    const wireType = key % 8
    if (field === 0) throw new WireError("field number 0")
    if (wireType === 0) {
      const [value, next] = readVarint(bytes, afterKey)
      fields.push({ field, wireType, value })
      pos = next
    } else if (wireType === 2) {
      const [length, start] = readVarint(bytes, afterKey)
      if (start + length > bytes.length) throw new WireError("truncated length-delimited field")
      fields.push({ field, wireType, bytes: bytes.subarray(start, start + length) })
      pos = start + length
    } else {
      throw new WireError(`unsupported wire type ${wireType} for field ${field}`)
    }
  }
  return fields
}

/** @internal */
export const asString = (f: Field): string => {
  if (f.wireType !== 2) throw new WireError(`field ${f.field} must be length-delimited`)
  try {
    return textDecoder.decode(f.bytes)
  } catch {
    throw new WireError(`field ${f.field} is not valid UTF-8`)
  }
}

/** @internal */
export const asBytes = (f: Field): Uint8Array => {
  if (f.wireType !== 2) throw new WireError(`field ${f.field} must be length-delimited`)
  return f.bytes
}

/** @internal */
export const asVarint = (f: Field): number => {
  if (f.wireType !== 0) throw new WireError(`field ${f.field} must be a varint`)
  return f.value
}

/** @internal */
export const bytesEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/**
 * Orders strings by their UTF-8 bytes, which is code-point order. JavaScript's default sort compares UTF-16
 * code units and disagrees for astral characters against U+E000..U+FFFF.
 *
 * @internal
 */
export const compareUtf8 = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    if (x >= 0xd800 && x <= 0xdfff && y >= 0xd800 && y <= 0xdfff) return x - y
    if (x >= 0xd800 && x <= 0xdfff) return y >= 0xe000 ? 1 : x - y
    if (y >= 0xd800 && y <= 0xdfff) return x >= 0xe000 ? -1 : x - y
    return x - y
  }
  return a.length - b.length
}

/** Writes a REAPI `Digest` message's fields (a `Directory`'s entries and an `Action` hold them). @internal */
export const writeDigest = (w: Writer, d: Digest.Digest): void => {
  if (d.hash.length > 0) w.stringField(1, d.hash)
  if (d.sizeBytes !== 0) w.varintField(2, d.sizeBytes)
}
