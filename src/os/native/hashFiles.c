/*
 * The files of a tree found and hashed at once, for a snapshot's first walk of a directory taken whole (a fresh
 * `node_modules`: tens of thousands of files, each opened, read and hashed on Node's one thread otherwise; see
 * src/os/native/HashFiles.ts).
 *
 * scanFiles(root: string, max: number): the regular files beneath `root`, as paths relative to it joined by NUL, or
 * null when there are more than `max` files and directories, when a directory cannot be read, or where openat2 is
 * missing. Every directory
 * is opened beneath `root` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: a symlink anywhere (one put there while this
 * runs included) is never followed, and nothing outside the tree is listed.
 *
 * hashFiles(root: string, names: string, stats: BigInt64Array, hashes: Uint8Array, errors: Int32Array): for each of
 * `names` (NUL-joined, relative to `root`), opened the same way (O_NOFOLLOW | O_NONBLOCK too: a FIFO put there is
 * not waited on) on a thread per CPU: its fstat into `stats` at 7 × its index (dev, ino, mode, size, mtime and ctime
 * in nanoseconds, and the bytes read: at most that size), the SHA-256 of those bytes into `hashes` at 32 × its index,
 * and 0 into `errors`; else the errno (ENOENT: gone, ELOOP: a symlink now), or -1 for what is not a regular file. The
 * stat and the bytes are of one open file: what was hashed is what the stat describes, unless it changed while it was
 * read (the caller compares).
 *
 * SHA-256 is Node's own OpenSSL (its executable exports it, as it does for every addon that uses the headers it
 * ships): declared weak here, so that a Node without it still loads the addon, and hashFiles says it cannot.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "treeWatch.h"

/* openat2(2), from the kernel's headers where they have it (5.6 and later), else as the kernel defines it: the
 * addon's other functions must build on older headers too (this one then finds no openat2 at run time, and says so). */
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#else
struct open_how {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* OpenSSL's SHA-256 (its context is 112 bytes in OpenSSL 1.1 and 3; room for more is left). */
typedef struct {
  _Alignas(16) unsigned char opaque[256];
} sha_ctx_t;
extern int SHA256_Init(void* ctx) __attribute__((weak));
extern int SHA256_Update(void* ctx, const void* data, size_t len) __attribute__((weak));
extern int SHA256_Final(unsigned char* md, void* ctx) __attribute__((weak));

#define STAT_FIELDS 7
#define FILES_PER_THREAD 256
#define READ_CHUNK (256 * 1024)
#define PATH_MAX_BYTES 8192
#define NOT_REGULAR (-1)

static int open_beneath(int root, const char* rel, uint64_t flags) {
  struct open_how how = {
      .flags = flags | O_CLOEXEC,
      .mode = 0,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  return (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
}

/* A growing buffer of NUL-joined names. */
typedef struct {
  char* bytes;
  size_t len, cap;
  size_t count;
} names_t;

static bool push_name(names_t* n, const char* dir, size_t dir_len, const char* name) {
  size_t name_len = strlen(name);
  size_t need = dir_len + (dir_len > 0 ? 1 : 0) + name_len + 1;
  if (n->len + need > n->cap) {
    size_t cap = n->cap == 0 ? 1 << 16 : n->cap;
    while (n->len + need > cap) cap *= 2;
    char* grown = realloc(n->bytes, cap);
    if (grown == NULL) return false;
    n->bytes = grown;
    n->cap = cap;
  }
  if (n->count > 0) n->bytes[n->len++] = 0;
  if (dir_len > 0) {
    memcpy(n->bytes + n->len, dir, dir_len);
    n->len += dir_len;
    n->bytes[n->len++] = '/';
  }
  memcpy(n->bytes + n->len, name, name_len);
  n->len += name_len;
  n->count++;
  return true;
}

/* `rel` + "/" + `name` (or `name` beneath the root), malloc'ed, or NULL. */
static char* child_of(const char* rel, size_t rel_len, const char* name) {
  size_t name_len = strlen(name);
  char* child = malloc(rel_len + 1 + name_len + 1);
  if (child == NULL) return NULL;
  if (rel_len == 0) return memcpy(child, name, name_len + 1);
  memcpy(child, rel, rel_len);
  child[rel_len] = '/';
  memcpy(child + rel_len + 1, name, name_len + 1);
  return child;
}

/* Lists the tree beneath `root` (an open directory): its regular files into `files`, depth first from a stack of the
 * directories still to list (each a malloc'ed path relative to `root`, "" for itself). False when a directory could
 * not be read, a path is too long, or there are more than `max` files and directories (a tree of empty directories
 * is bounded too, not only one of files). */
static bool scan(int root, names_t* files, size_t max) {
  size_t len = 0, cap = 64;
  char** stack = malloc(sizeof(char*) * cap);
  if (stack == NULL || (stack[len] = strdup("")) == NULL) {
    free(stack);
    return false;
  }
  len++;
  size_t dirs = 0;
  bool ok = true;
  while (ok && len > 0) {
    char* rel = stack[--len];
    size_t rel_len = strlen(rel);
    int fd = rel_len == 0 ? dup(root) : open_beneath(root, rel, O_RDONLY | O_DIRECTORY);
    DIR* d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
      if (fd >= 0) close(fd);
      free(rel);
      ok = false;
      break;
    }
    struct dirent* e;
    while (ok && (e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
      }
      if (rel_len + 1 + strlen(e->d_name) + 1 > PATH_MAX_BYTES) {
        ok = false;
      } else if (type == DT_REG) {
        ok = files->count + dirs < max && push_name(files, rel, rel_len, e->d_name);
      } else if (type == DT_DIR && ++dirs + files->count > max) {
        ok = false;
      } else if (type == DT_DIR) {
        char** grown = len < cap ? stack : realloc(stack, sizeof(char*) * (cap *= 2));
        char* child = grown == NULL ? NULL : child_of(rel, rel_len, e->d_name);
        if (grown != NULL) stack = grown;
        if (child == NULL) ok = false;
        else stack[len++] = child;
      }
    }
    closedir(d);
    free(rel);
  }
  for (size_t i = 0; i < len; i++) free(stack[i]);
  free(stack);
  return ok;
}

static napi_value scan_files(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  double max;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 2 ||
      napi_get_value_double(env, argv[1], &max) != napi_ok || !(max >= 0)) {
    return fail(env, "scanFiles(root, max)");
  }
  size_t root_len;
  char* root = utf8_of(env, argv[0], &root_len);
  if (root == NULL) return fail(env, "scanFiles: root must be a string");
  int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  free(root);
  napi_value result;
  if (napi_get_null(env, &result) != napi_ok) return NULL;
  if (root_fd < 0) return result;
  /* openat2 missing (Linux before 5.6, or refused by a seccomp filter): no scan, the caller walks as before. */
  int probe = open_beneath(root_fd, ".", O_RDONLY | O_DIRECTORY);
  if (probe < 0) {
    close(root_fd);
    return result;
  }
  close(probe);
  names_t files = {0};
  bool ok = scan(root_fd, &files, (size_t)max);
  close(root_fd);
  if (ok && napi_create_string_utf8(env, files.count == 0 ? "" : files.bytes, files.len, &result) != napi_ok) {
    free(files.bytes);
    return NULL;
  }
  free(files.bytes);
  return result;
}

typedef struct {
  int root;
  const char* const* names;
  size_t lo, hi;
  int64_t* stats;
  unsigned char* hashes;
  int32_t* errors;
} hash_range_t;

static int hash_one(int root, const char* rel, int64_t* st_out, unsigned char* md, unsigned char* buf) {
  int fd = open_beneath(root, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return NOT_REGULAR;
  }
  sha_ctx_t ctx;
  SHA256_Init(&ctx);
  /* At most the size fstat gave: a file that grows while it is read is not followed for ever (its next stat says it
   * changed), and a signal to the process is not kept waiting on this thread's join. */
  int64_t total = 0;
  while (total < (int64_t)st.st_size) {
    int64_t left = (int64_t)st.st_size - total;
    ssize_t n = pread(fd, buf, left < READ_CHUNK ? (size_t)left : READ_CHUNK, total);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return e;
    }
    if (n == 0) break;
    SHA256_Update(&ctx, buf, (size_t)n);
    total += n;
  }
  SHA256_Final(md, &ctx);
  close(fd);
  st_out[0] = (int64_t)st.st_dev;
  st_out[1] = (int64_t)st.st_ino;
  st_out[2] = (int64_t)st.st_mode;
  st_out[3] = (int64_t)st.st_size;
  st_out[4] = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  st_out[5] = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  st_out[6] = total;
  return 0;
}

static void* hash_thread(void* arg) {
  hash_range_t* r = arg;
  unsigned char* buf = malloc(READ_CHUNK);
  for (size_t i = r->lo; i < r->hi; i++) {
    int64_t* st = r->stats + i * STAT_FIELDS;
    r->errors[i] = buf == NULL ? ENOMEM : hash_one(r->root, r->names[i], st, r->hashes + i * 32, buf);
  }
  free(buf);
  return NULL;
}

static bool typed_info(napi_env env, napi_value v, napi_typedarray_type want, size_t* len, void** data) {
  bool is_typed;
  napi_typedarray_type type;
  return napi_is_typedarray(env, v, &is_typed) == napi_ok && is_typed &&
         napi_get_typedarray_info(env, v, &type, len, data, NULL, NULL) == napi_ok && type == want;
}

static napi_value hash_files(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 5) {
    return fail(env, "hashFiles(root, names, stats, hashes, errors)");
  }
  size_t stats_len, hashes_len, errors_len;
  void *stats, *hashes, *errors;
  if (!typed_info(env, argv[2], napi_bigint64_array, &stats_len, &stats) ||
      !typed_info(env, argv[3], napi_uint8_array, &hashes_len, &hashes) ||
      !typed_info(env, argv[4], napi_int32_array, &errors_len, &errors)) {
    return fail(env, "hashFiles: stats a BigInt64Array, hashes a Uint8Array, errors an Int32Array");
  }
  napi_value result;
  if (SHA256_Init == NULL || SHA256_Update == NULL || SHA256_Final == NULL) {
    /* This Node exports no SHA-256: the caller hashes as before. */
    if (napi_get_boolean(env, false, &result) != napi_ok) return NULL;
    return result;
  }
  size_t root_len, joined_len;
  char* root = utf8_of(env, argv[0], &root_len);
  char* joined = root == NULL ? NULL : utf8_of(env, argv[1], &joined_len);
  size_t count = errors_len;
  const char** names = joined == NULL ? NULL : malloc(sizeof(char*) * (count + 1));
  if (names == NULL) {
    free(root);
    free(joined);
    return fail(env, "hashFiles: root and names must be strings (or out of memory)");
  }
  size_t n = split_names(joined, joined_len, names, NULL, count);
  if (n != count || stats_len != count * STAT_FIELDS || hashes_len != count * 32 || count == 0) {
    free(root);
    free(joined);
    free(names);
    return fail(env, "hashFiles: stats, hashes and errors must hold 7, 32 and 1 per name");
  }
  int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  free(root);
  if (root_fd < 0) {
    free(joined);
    free(names);
    if (napi_get_boolean(env, false, &result) != napi_ok) return NULL;
    return result;
  }
  size_t threads = threads_for(count, FILES_PER_THREAD);
  hash_range_t ranges[MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    ranges[t] = (hash_range_t){root_fd, names, count * t / threads, count * (t + 1) / threads, stats, hashes, errors};
  }
  run_on_threads(hash_thread, ranges, sizeof ranges[0], threads);
  close(root_fd);
  free(joined);
  free(names);
  if (napi_get_boolean(env, true, &result) != napi_ok) return NULL;
  return result;
}

bool hash_files_exports(napi_env env, napi_value exports) {
  napi_value fn;
  return napi_create_function(env, "scanFiles", NAPI_AUTO_LENGTH, scan_files, NULL, &fn) == napi_ok &&
         napi_set_named_property(env, exports, "scanFiles", fn) == napi_ok &&
         napi_create_function(env, "hashFiles", NAPI_AUTO_LENGTH, hash_files, NULL, &fn) == napi_ok &&
         napi_set_named_property(env, exports, "hashFiles", fn) == napi_ok;
}
