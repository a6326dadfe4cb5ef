/** kiln's version, as `kiln --version` prints it. */
export const VERSION = "0.1.0"
