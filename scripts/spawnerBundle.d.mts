/** Writes the spawner's bundle (src/programs/spawner/main.ts) to `outfile`; fails if it took in code from outside src/. */
export declare const bundleSpawner: (outfile: string, options?: { readonly minify?: boolean }) => Promise<void>
