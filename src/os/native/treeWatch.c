/*
 * treeWatch: an inotify watch over every directory and file of a tree a run memo keeps whole (TreeWatch.ts beside
 * it), so that a standby that found the tree as recorded once can say it still is without an `lstat` of each path.
 *
 * watchTree(prefix: string, names: string, kinds: string, cap: number): an inotify descriptor (non-blocking,
 * close-on-exec) with a watch on `prefix` + each of `names` (separated by NUL) whose kind (the same index of `kinds`)
 * is `d` (a directory: the changes of its entries and its own) or `f` (a file: its own changes, by whichever of its
 * links they are made: a file's watch is on its inode). Other kinds (`l`, `a`) are seen through their directory's
 * watch. -1, with nothing left open, when the tree cannot be watched wholly: a path gone or of another kind, a
 * tree on a file system whose changes inotify may not see (NFS, FUSE, overlays: only the local ones below are taken),
 * more than `cap` watches, or the user's inotify limits reached.
 *
 * treeChanged(fd): whether anything was reported on `fd` since it was made (an event, or the queue's overflow), or it
 * cannot be read: then the caller stops trusting it. Events are read, not parsed: any one means "look again".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <node_api.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "treeWatch.h"

#define PATH_MAX_BYTES 8192

/* What changes a directory's stat, its entries' names, or a file in it reached through it. */
#define DIR_EVENTS                                                                                              \
  (IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | \
   IN_ONLYDIR | IN_DONT_FOLLOW)
/* What changes a file's bytes or stat (a link made or removed elsewhere included: its count is in the inode). */
#define FILE_EVENTS (IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW)

/* Local file systems, whose every change goes through this kernel's VFS and so reaches inotify. */
static bool local_file_system(long type) {
  switch ((unsigned long)type) {
    case 0xEF53UL:     /* ext2, ext3, ext4 */
    case 0x58465342UL: /* xfs */
    case 0x9123683EUL: /* btrfs */
    case 0x01021994UL: /* tmpfs */
    case 0xF2F52010UL: /* f2fs */
      return true;
    default:
      return false;
  }
}

/* Adds the watches; false (nothing to trust) at the first that cannot be added or past `cap`. */
static bool watch_all(int fd, const char* prefix, size_t prefix_len, const char* names, size_t names_len,
                      const char* kinds, size_t count, int32_t cap) {
  char path[PATH_MAX_BYTES];
  if (prefix_len + 1 > sizeof path) return false;
  memcpy(path, prefix, prefix_len);
  int32_t watches = 0;
  const char* name = names;
  const char* end = names + names_len;
  for (size_t i = 0; i < count; i++) {
    if (name > end) return false;
    const char* stop = memchr(name, 0, (size_t)(end - name));
    size_t len = stop == NULL ? (size_t)(end - name) : (size_t)(stop - name);
    uint32_t mask = kinds[i] == 'd' ? DIR_EVENTS : kinds[i] == 'f' ? FILE_EVENTS : 0;
    if (mask != 0) {
      if (++watches > cap || prefix_len + len + 1 > sizeof path) return false;
      memcpy(path + prefix_len, name, len);
      path[prefix_len + len] = 0;
      /* The tree's own file system, not the workspace's: a tree mounted there (FUSE, NFS, an overlay) would pass a
       * look at the workspace. One look is enough: every path of the tree was recorded on one device, and the
       * comparison with the record that follows the watch finds any that is not now. */
      struct statfs fs;
      if (watches == 1 && (statfs(path, &fs) != 0 || !local_file_system((long)fs.f_type))) return false;
      if (inotify_add_watch(fd, path, mask) < 0) return false;
    }
    name += len + 1;
  }
  /* Every name taken, none left over: the count and the names agree. */
  return name == end + 1 || (count == 0 && names_len == 0);
}

static napi_value watch_tree(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  int32_t cap;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 4 ||
      napi_get_value_int32(env, argv[3], &cap) != napi_ok) {
    return fail(env, "watchTree(prefix, names, kinds, cap)");
  }
  size_t prefix_len, names_len, count;
  char* prefix = utf8_of(env, argv[0], &prefix_len);
  char* names = utf8_of(env, argv[1], &names_len);
  char* kinds = utf8_of(env, argv[2], &count);
  int fd = -1;
  size_t watched = 0;
  for (size_t i = 0; kinds != NULL && i < count; i++) watched += kinds[i] == 'd' || kinds[i] == 'f';
  /* Past the cap, nothing is made (the caller counts too; this is its guard). */
  if (prefix != NULL && names != NULL && kinds != NULL && watched <= (size_t)(cap < 0 ? 0 : cap)) {
    fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0 && !watch_all(fd, prefix, prefix_len, names, names_len, kinds, count, cap)) {
      close(fd);
      fd = -1;
    }
  }
  free(prefix);
  free(names);
  free(kinds);
  napi_value result;
  if (napi_create_int32(env, fd, &result) != napi_ok) return NULL;
  return result;
}

static napi_value tree_changed(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!fd_argument(env, info, &fd)) return fail(env, "treeChanged(fd)");
  /* Large enough for one event with the longest name: the read then never fails for a short buffer. */
  char events[sizeof(struct inotify_event) + 256 + 1] __attribute__((aligned(__alignof__(struct inotify_event))));
  ssize_t rc;
  do rc = fd < 0 ? -1 : read(fd, events, sizeof events);
  while (rc < 0 && errno == EINTR);
  bool changed = !(rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  napi_value result;
  if (napi_get_boolean(env, changed, &result) != napi_ok) return NULL;
  return result;
}

bool tree_watch_exports(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "watchTree", NAPI_AUTO_LENGTH, watch_tree, NULL, &fn) != napi_ok) return false;
  if (napi_set_named_property(env, exports, "watchTree", fn) != napi_ok) return false;
  if (napi_create_function(env, "treeChanged", NAPI_AUTO_LENGTH, tree_changed, NULL, &fn) != napi_ok) return false;
  return napi_set_named_property(env, exports, "treeChanged", fn) == napi_ok;
}
