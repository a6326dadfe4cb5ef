/**
 * How this process's C library allocates: for kiln's own engine (the CLI and its standby), never for a program that
 * embeds the library, whose allocator is its own business.
 *
 * glibc serves a block of 128 KiB or more with a mapping of its own, unmapped when freed, and gives back an arena's
 * free top once it passes 128 KiB; but each time a mapped block is freed it raises both thresholds (up to 32 and 64
 * MiB), and from then on the arenas keep what is freed in them. In an engine run that is mostly what the arenas of V8's
 * compiler threads freed after their jobs: resident memory no run was using. With both thresholds fixed (the trim
 * threshold at 1 MiB, so that the arenas are not shrunk and grown again job after job) a cold run's peak RSS is
 * lower, for a little more CPU (docs/bench-log.md).
 *
 * @internal
 */
import * as NativeAddon from "./Addon.js"

/**
 * Fixes glibc's mmap and trim thresholds, through kiln's addon; whether it did (not without the addon, nor under
 * another C library). Call it as early as the process can.
 */
export const fixThresholds = (): boolean => {
  const fix = NativeAddon.exports()?.fixThresholds
  try {
    return typeof fix === "function" && fix() === true
  } catch {
    return false
  }
}
