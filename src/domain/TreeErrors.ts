/**
 * Failures of the trees a process is given and makes that are the user's to fix (the config, or the process's
 * command), not the store's: the store did what it was asked, and what it was asked cannot be done.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Two of a process's inputs (its own files, its deps' outputs at their working directories) fill one path
 * differently. `path` is the path in the merged input tree; `first` and `second` say what each input has there
 * (`file <digest>`, `executable file <digest>`, `a directory`, `symlink -> <target>`).
 *
 * @since 0.1.0
 * @category errors
 */
export class InputConflict extends Schema.TaggedError<InputConflict>("kiln/InputConflict")("InputConflict", {
  path: Schema.String,
  first: Schema.String,
  second: Schema.String
}) {
  override get message(): string {
    return `conflicting inputs at \`${this.path}\`: one input has ${this.first} there, another ${this.second}`
  }
}

/**
 * A declared output that cannot be captured as declared: the process made the other kind of entry there (a symlink
 * where a directory is declared is one), the path leaves the sandbox, or it goes through a symlink; or what the
 * process made holds a symlink that leads out of its working directory (unless its `outputSymlinks` is `any`), or a
 * path deeper than `Directory.MAX_DEPTH`. `output` is the path as declared (or the offending path under it);
 * `problem` completes the sentence "output `<output>` …".
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOutput extends Schema.TaggedError<InvalidOutput>("kiln/InvalidOutput")("InvalidOutput", {
  output: Schema.String,
  problem: Schema.String
}) {
  override get message(): string {
    return `output \`${this.output}\` ${this.problem}`
  }
}
