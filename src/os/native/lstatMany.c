/*
 * lstatMany: the lstat of many paths at once, for the checks that find a large tree (a real `node_modules`: tens of
 * thousands of paths) as it was (src/os/StatMany.ts). Node's own lstat costs a call into its binding and a
 * conversion per path on its one thread; here the paths cross once, and the calls are shared out between threads, one
 * per online CPU (at most MAX_THREADS), each working through a contiguous range so that siblings, which the callers
 * list together, are stat'ed by name in their parent directory (`fstatat`) instead of walking every component again.
 *
 * lstatMany(prefix: string, names: string, out: Float64Array): each path is `prefix` followed by one of `names`
 * (separated by NUL, which no path holds); its stat goes into `out` at 6 × its index: dev, ino, mode, size, and
 * the modification and change times in milliseconds, computed as Node computes `mtimeMs` (seconds × 1e3 +
 * nanoseconds / 1e6, in doubles: the same number, to compare with `===`). A path that cannot be stat'ed (absent, a
 * parent that is not a directory, no permission) gets mode -1. The caller sizes `out` to 6 × the count of names; any
 * mismatch is a TypeError.
 *
 * An N-API module: built by scripts/nativeAddons.mjs with the C compiler kiln's install uses, and loaded only after it
 * gives, for a real path, what Node's fs gives (StatMany.ts).
 *
 * fixThresholds(): kiln's own process's malloc tuning (Malloc.ts beside it), and mountsChanged(fd): whether the mount
 * table has changed since it was last read (src/os/mounts/Mounts.ts), here because this is kiln's one addon; its
 * init also registers treeWatch.c's functions.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "treeWatch.h"

#define FIELDS 6
/* Fewer paths than this per thread are not worth a thread's start. */
#define PATHS_PER_THREAD 2048
#define PATH_MAX_BYTES 8192

typedef struct {
  const char* prefix;
  size_t prefix_len;
  const char* const* names;
  const size_t* lengths;
  size_t lo, hi;
  double* out;
} range_t;

static void put(double* o, const struct stat* st) {
  o[0] = (double)st->st_dev;
  o[1] = (double)st->st_ino;
  o[2] = (double)st->st_mode;
  o[3] = (double)st->st_size;
  o[4] = (double)st->st_mtim.tv_sec * 1e3 + (double)st->st_mtim.tv_nsec / 1e6;
  o[5] = (double)st->st_ctim.tv_sec * 1e3 + (double)st->st_ctim.tv_nsec / 1e6;
}

static void stat_range(range_t* r) {
  char path[PATH_MAX_BYTES];
  /* The parent directory last opened, by its path's length and bytes in `path`'s prefix. */
  char parent[PATH_MAX_BYTES];
  size_t parent_len = (size_t)-1;
  int parent_fd = -1;
  memcpy(path, r->prefix, r->prefix_len);
  for (size_t i = r->lo; i < r->hi; i++) {
    double* o = r->out + i * FIELDS;
    size_t len = r->prefix_len + r->lengths[i];
    if (len + 1 > sizeof path) {
      o[2] = -1;
      continue;
    }
    memcpy(path + r->prefix_len, r->names[i], r->lengths[i]);
    path[len] = 0;
    struct stat st;
    int rc;
    const char* slash = strrchr(path, '/');
    if (slash != NULL && slash != path && slash[1] != 0) {
      size_t dir_len = (size_t)(slash - path);
      if (dir_len != parent_len || memcmp(parent, path, dir_len) != 0) {
        if (parent_fd >= 0) close(parent_fd);
        memcpy(parent, path, dir_len);
        parent[dir_len] = 0;
        parent_len = dir_len;
        parent_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
      }
      /* A parent that cannot be opened: the whole path answers why (absent, not a directory, no permission). */
      rc = parent_fd >= 0 ? fstatat(parent_fd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) : lstat(path, &st);
    } else {
      rc = lstat(path, &st);
    }
    if (rc != 0) {
      o[2] = -1;
      continue;
    }
    put(o, &st);
  }
  if (parent_fd >= 0) close(parent_fd);
}

static void* stat_thread(void* arg) {
  stat_range((range_t*)arg);
  return NULL;
}

size_t split_names(char* joined, size_t joined_len, const char** names, size_t* lengths, size_t count) {
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= joined_len; i++) {
    if (i < joined_len && joined[i] != 0) continue;
    if (n < count) {
      names[n] = joined + start;
      if (lengths != NULL) lengths[n] = i - start;
    }
    n++;
    start = i + 1;
  }
  return n;
}

size_t threads_for(size_t count, size_t per_thread) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t threads = cpus < 1 ? 1 : (size_t)cpus;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads > count / per_thread) threads = count / per_thread;
  return threads < 1 ? 1 : threads;
}

void run_on_threads(void* (*fn)(void*), void* items, size_t item_size, size_t n) {
  pthread_t ids[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  char* at = items;
  /* Items past the first on threads of their own; one that cannot start is done here, as the first is. */
  for (size_t t = 1; t < n; t++) started[t] = pthread_create(&ids[t], NULL, fn, at + t * item_size) == 0;
  fn(at);
  for (size_t t = 1; t < n; t++) {
    if (started[t]) pthread_join(ids[t], NULL);
    else fn(at + t * item_size);
  }
}

napi_value fail(napi_env env, const char* message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

char* utf8_of(napi_env env, napi_value v, size_t* len) {
  if (napi_get_value_string_utf8(env, v, NULL, 0, len) != napi_ok) return NULL;
  char* s = malloc(*len + 1);
  if (s == NULL) return NULL;
  if (napi_get_value_string_utf8(env, v, s, *len + 1, len) != napi_ok) {
    free(s);
    return NULL;
  }
  return s;
}

static napi_value lstat_many(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 3) {
    return fail(env, "lstatMany(prefix, names, out)");
  }
  napi_typedarray_type type;
  size_t out_len;
  void* out_data;
  bool is_typed;
  if (napi_is_typedarray(env, argv[2], &is_typed) != napi_ok || !is_typed) return fail(env, "out: a Float64Array");
  if (napi_get_typedarray_info(env, argv[2], &type, &out_len, &out_data, NULL, NULL) != napi_ok ||
      type != napi_float64_array) {
    return fail(env, "out: a Float64Array");
  }
  size_t prefix_len, joined_len;
  char* prefix = utf8_of(env, argv[0], &prefix_len);
  char* joined = prefix == NULL ? NULL : utf8_of(env, argv[1], &joined_len);
  size_t count = out_len / FIELDS;
  const char** names = joined == NULL ? NULL : malloc(sizeof(char*) * (count + 1));
  size_t* lengths = names == NULL ? NULL : malloc(sizeof(size_t) * (count + 1));
  if (lengths == NULL) {
    free(prefix);
    free(joined);
    free(names);
    return fail(env, "lstatMany: prefix and names must be strings (or out of memory)");
  }
  /* Exactly `count` names, or the caller's table does not match them. */
  size_t n = split_names(joined, joined_len, names, lengths, count);
  if (out_len % FIELDS != 0 || n != count || prefix_len >= PATH_MAX_BYTES) {
    free(prefix);
    free(joined);
    free(names);
    free(lengths);
    return fail(env, "lstatMany: out must hold 6 numbers per name");
  }
  size_t threads = threads_for(count, PATHS_PER_THREAD);
  range_t ranges[MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    ranges[t] = (range_t){prefix, prefix_len, names, lengths, count * t / threads, count * (t + 1) / threads,
                          (double*)out_data};
  }
  run_on_threads(stat_thread, ranges, sizeof ranges[0], threads);
  free(prefix);
  free(joined);
  free(names);
  free(lengths);
  return NULL;
}

/*
 * fixThresholds(): whether glibc's thresholds are now fixed: blocks of 128 KiB and more mapped on their own, and
 * an arena's free top given back once it passes 1 MiB. Left to itself, glibc raises both each time a mapped block is
 * freed (the trim threshold to twice the mmap threshold, up to 64 MiB), and the arenas of V8's compiler threads then
 * keep what their jobs freed. False where the C library is not glibc (no mallopt) or refused either.
 */
static napi_value fix_thresholds(napi_env env, napi_callback_info info) {
  (void)info;
#if defined(__GLIBC__)
  bool fixed = mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1 && mallopt(M_TRIM_THRESHOLD, 1024 * 1024) == 1;
#else
  bool fixed = false;
#endif
  napi_value result;
  if (napi_get_boolean(env, fixed, &result) != napi_ok) return NULL;
  return result;
}

/*
 * mountsChanged(fd): whether the mount table `fd` reads (an open /proc/self/mountinfo) may differ from when it was
 * opened or this last answered: the kernel marks such a file POLLPRI | POLLERR once after each change to its mount
 * namespace (a mount, an unmount, one propagated into it), as util-linux and systemd watch it. True as well when it
 * cannot tell (a poll that fails, a descriptor that is not open): the caller then reads the table.
 */
bool fd_argument(napi_env env, napi_callback_info info, int32_t* fd) {
  size_t argc = 1;
  napi_value argv[1];
  return napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc == 1 &&
         napi_get_value_int32(env, argv[0], fd) == napi_ok;
}

static napi_value mounts_changed(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!fd_argument(env, info, &fd)) return fail(env, "mountsChanged(fd)");
  struct pollfd watched = {.fd = fd, .events = POLLPRI, .revents = 0};
  int rc;
  do rc = poll(&watched, 1, 0);
  while (rc < 0 && errno == EINTR);
  napi_value result;
  if (napi_get_boolean(env, rc != 0 || fd < 0, &result) != napi_ok) return NULL;
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "lstatMany", NAPI_AUTO_LENGTH, lstat_many, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "lstatMany", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "fixThresholds", NAPI_AUTO_LENGTH, fix_thresholds, NULL, &fn) != napi_ok) {
    return NULL;
  }
  if (napi_set_named_property(env, exports, "fixThresholds", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "mountsChanged", NAPI_AUTO_LENGTH, mounts_changed, NULL, &fn) != napi_ok) {
    return NULL;
  }
  if (napi_set_named_property(env, exports, "mountsChanged", fn) != napi_ok) return NULL;
  if (!tree_watch_exports(env, exports)) return NULL;
  if (!hash_files_exports(env, exports)) return NULL;
  return exports;
}
