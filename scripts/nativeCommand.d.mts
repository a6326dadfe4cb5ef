/** `dist/kiln` where no native one can run: `node` with the `cli.cjs` beside the script's real path. */
export declare const shellFallback: string
