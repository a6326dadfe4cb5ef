/** The most lines a file in src/ may have. */
export declare const MAX_FILE_LINES: number
/** The most lines a function in src/ may have. */
export declare const MAX_FUNCTION_LINES: number
/** Every file and function under `root` over the bar, as `file:line name: N lines (the bar is M)`. */
export declare const oversized: (root: string) => Array<string>
