/**
 * Reading kiln's own large text files (the run memo and its journal, saved walks, the stat index): Node's UTF-8
 * decoding of a megabyte costs several times the copy that latin1 is, and bytes that are all ASCII (paths in ASCII:
 * the usual case) are the same characters either way.
 */
import { isAscii } from "node:buffer"
import * as fs from "node:fs"

/** `bytes` as text: UTF-8, decoded as latin1 when every byte is ASCII (the same characters, faster). */
export const decode = (bytes: Buffer): string => isAscii(bytes) ? bytes.toString("latin1") : bytes.toString("utf8")

/** The whole of a file (by path or open descriptor) as text; throws as `fs.readFileSync` does. */
export const read = (file: string | number): string => decode(fs.readFileSync(file))
