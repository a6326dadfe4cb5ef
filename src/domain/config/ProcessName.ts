/**
 * What may name a process, and how an error line quotes a name: for what gives processes their names besides
 * kiln.json (a workspace's packages, `Tasks.ts`). Plain code without Effect: the no-op check expands tasks before it
 * loads anything.
 */
import { quoted } from "../internal/fieldText.js"
import { nameProblem } from "../internal/processChecks.js"

/** Why `name` cannot name a process (a control character, a bidirectional control, edge whitespace), if it cannot. */
export const problemOf = (name: string): string | undefined => nameProblem(name)

/** `s` as a JSON string safe on a terminal: what an error line quotes. */
export const quote = (s: string): string => quoted(s)
