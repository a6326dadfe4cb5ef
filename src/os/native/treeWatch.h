/* treeWatch.c's functions, registered on the addon's exports by lstatMany.c's module init (one addon, one init). */
#ifndef KILN_TREE_WATCH_H
#define KILN_TREE_WATCH_H
#include <node_api.h>
#include <stdbool.h>

/* Adds `watchTree` and `treeChanged` to `exports`; false when N-API refused. */
bool tree_watch_exports(napi_env env, napi_value exports);

#endif
