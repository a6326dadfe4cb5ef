/** The lmdb-js options kiln's store opens a shard with (lmdbEnvs.ts `optionsOf`), for the stress tests beside it. */
export const envOptions = (dir, mapSize) => ({
  path: dir,
  noSubdir: false,
  mapSize,
  maxReaders: 126,
  maxDbs: 4,
  encoding: "binary",
  keyEncoding: "binary",
  compression: false,
  cache: false
})
