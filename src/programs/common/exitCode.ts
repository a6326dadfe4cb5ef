/**
 * The exit code after SIGINT/SIGTERM: 130 for kiln's commands (the shell's convention for Ctrl-C); the sandboxer,
 * whose drain on SIGTERM is its normal way out, sets 0.
 */
export const onInterrupt = { code: 130 }
