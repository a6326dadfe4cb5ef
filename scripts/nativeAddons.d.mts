/** Compiles the lstat addon (src/os/native/lstatMany.c) to `outfile`: undefined once built, or why it was not. */
export declare const buildLstatAddon: (outfile: string) => string | undefined
