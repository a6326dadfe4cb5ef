/* treeWatch.c's functions, registered on the addon's exports by lstatMany.c's module init (one addon, one init),
 * and the helpers both files use. */
#ifndef KILN_TREE_WATCH_H
#define KILN_TREE_WATCH_H
#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

/* Adds `watchTree` and `treeChanged` to `exports`; false when N-API refused. */
bool tree_watch_exports(napi_env env, napi_value exports);

/* hashFiles.c's `scanFiles` and `hashFiles`, added to `exports` the same way. */
bool hash_files_exports(napi_env env, napi_value exports);

/* lstatMany.c's helpers, shared: a TypeError thrown (NULL returned), and a JS string's UTF-8 bytes, malloc'ed and
 * NUL-terminated, or NULL. */
napi_value fail(napi_env env, const char* message);
char* utf8_of(napi_env env, napi_value v, size_t* len);
/* `joined`'s names (NUL-separated) into `names` (and their lengths into `lengths`, unless NULL), at most `count` of
 * them: how many there are. */
size_t split_names(char* joined, size_t joined_len, const char** names, size_t* lengths, size_t count);
/* How many threads `count` items take: one per online CPU, at most MAX_THREADS, and at least `per_thread` items each. */
#define MAX_THREADS 8
size_t threads_for(size_t count, size_t per_thread);
/* Runs `fn` on each of `n` items (`item_size` bytes apart from `items`): the first here, the others on threads of
 * their own, joined before it returns. */
void run_on_threads(void* (*fn)(void*), void* items, size_t item_size, size_t n);
/* Whether the call's one argument is a 32-bit integer (a descriptor), put in `fd`. */
bool fd_argument(napi_env env, napi_callback_info info, int32_t* fd);

#endif
