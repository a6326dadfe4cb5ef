/**
 * What may name a process, and how an error line quotes a name: for what gives processes their names besides
 * kiln.json (a workspace's packages, `Tasks.ts`). Plain code without Effect: the no-op check expands tasks before it
 * loads anything.
 */
import { escapeControls, jsonText, quoted } from "../internal/fieldText.js"
import { nameProblem } from "../internal/processChecks.js"

/** Why `name` cannot name a process (a control character, a bidirectional control, edge whitespace), if it cannot. */
export const problemOf = (name: string): string | undefined => nameProblem(name)

/** `s` as a JSON string safe on a terminal: what an error line quotes. */
export const quote = (s: string): string => quoted(s)

/**
 * `s` with every control character (and bidirectional control) written as a `\uXXXX` escape: what kiln prints of a
 * config's values (an argv in `kiln ls`) cannot redraw the terminal, write its clipboard or forge a line.
 */
export const printable = (s: string): string => escapeControls(s)

/**
 * `value` as JSON text (`indent` as JSON.stringify's) that a terminal shows as it is: what kiln prints with `--json`
 * holds names and paths from a workspace or a remote, and JSON.stringify leaves the C1 and bidirectional controls raw.
 */
export const printableJson = (value: unknown, indent?: number): string => jsonText(value, indent)
