/** Compiles the native spawner (src/programs/spawner/native/*.c) to `outfile`: undefined once built, or why it was not. */
export declare const buildNativeSpawner: (outfile: string) => string | undefined
