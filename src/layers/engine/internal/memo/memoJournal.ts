/**
 * The run memo's journal (see `RunMemo.ts`): beside the memo, the changes of runs that recorded few processes, one
 * JSON line each, applied in order over the memo when it is read.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as Journal from "../../../../os/Journal.js"
import * as TextFile from "../../../../os/TextFile.js"
import type { Entry, Memo } from "../../RunMemo.js"
import type * as MemoGroups from "./memoGroups.js"

/** A file's identity and version: a memo or journal read earlier is the same while this is. */
export const stampOf = (st: fs.BigIntStats): string => `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`

/**
 * Beside the memo: the changes of runs that recorded few processes, one JSON line each (see {@link append}), applied
 * in order over the memo when it is read. An edit run then writes a line of about a kilobyte instead of rewriting
 * every process's entry (a megabyte for 1,000 processes, and its cost grew with the workspace).
 */
export const journalOf = (file: string): string => file.replace(/\.json$/, ".journal")

/** A journal line: entries set and processes dropped by one run, over a memo of the same generation and config. */
export interface JournalLine {
  readonly v: number
  readonly build: string
  readonly generation: string
  readonly config: string
  /** The store's files when the line was written: they replace the memo's (a shard made since is covered too). */
  readonly store: Memo["store"]
  readonly set: Record<string, Entry>
  readonly drop: ReadonlyArray<string>
  /** Groups the entries set refer to that the memo did not hold. */
  readonly groups?: Record<string, MemoGroups.Group>
  readonly sandboxer?: boolean
}

/**
 * Runs that record at most this many entries append them to the journal. A restore records every process of the
 * workspace again (their outputs have new stats), and a memo holding a large tree's group is megabytes (a pnpm
 * `node_modules` of 52k paths: 14 MB), which rewriting cost more than the rest of a restore: the bound that matters
 * is the journal's size, below.
 */
export const APPEND_AT_MOST = 4096
/**
 * A journal that would grow past this size is merged: the memo is rewritten whole. Every read of the memo parses
 * the journal too, which at this size is a small part of parsing a memo that holds a large tree.
 */
export const JOURNAL_MAX_BYTES = 1024 * 1024

/**
 * Applies a journal's lines over `memo`, in order. A line cut short (a crash while appending) is skipped; so is a
 * line over another generation, config or build (appended before the memo was rewritten): every entry carries its
 * own evidence, so a line lost this way costs a check of the store, never a wrong answer.
 */
export const applyJournal = (memo: Memo, text: string): void =>
  Journal.replay(text, (value) => {
    const line = value as unknown as JournalLine
    if (
      line.v !== memo.v || line.build !== memo.build || line.generation !== memo.generation ||
      line.config !== memo.config || typeof line.set !== "object" || !Array.isArray(line.drop) ||
      !Array.isArray(line.store)
    ) return
    for (const name of line.drop) delete memo.processes[name]
    Object.assign(memo.processes, line.set)
    if (line.groups !== undefined) {
      ;(memo as { groups?: Record<string, MemoGroups.Group> }).groups = { ...memo.groups, ...line.groups }
    }
    ;(memo as { store: Memo["store"] }).store = line.store
    if (typeof line.sandboxer === "boolean") (memo as { sandboxer?: boolean }).sandboxer = line.sandboxer
  })

/** The journal's text and a stamp of it ("-" when there is none). */
export const readJournal = (file: string): { readonly text: string; readonly stamp: string } => {
  let fd: number | undefined
  try {
    fd = TextFile.openRegular(journalOf(file))
    return { stamp: stampOf(fs.fstatSync(fd, { bigint: true })), text: TextFile.read(fd) }
  } catch {
    return { stamp: "-", text: "" }
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}
