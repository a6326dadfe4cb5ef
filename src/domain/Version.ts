/** kiln's version, as `kiln --version` prints it and a remote cache's user agent names it. */
export const VERSION = "0.1.0"
