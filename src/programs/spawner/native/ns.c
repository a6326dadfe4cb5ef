/*
 * The mount namespace a process runs in, when its spawn request names one (`namespace`): what
 * `src/os/MountNamespace.ts`'s wrapper does with unshare(1), sh and mount(8), done here with the system calls in the
 * forked child, before it execs. Three programs fewer per process, and a program that cannot run is reported as one
 * (ENOENT, ETXTBSY retried), not as a shell's exit 127.
 *
 * `namespace` is [mode, sandbox, root, cwd, kind, source, target, kind, source, target, …]: mode `root` (a mount
 * namespace is enough) or `user` (a user namespace to mount in, and a second one inside it that maps the user back to
 * itself, so that the mounts are locked for the process); each mount made in turn by its kind (`ro`: source bound
 * read-only over target; `overlay`: an overlay with the options source; `rw`: source bound read-write; `seal`: the
 * mount at target made read-only, those under it staying as they are); then the sandbox (with those mounts inside
 * it) bound over `root`, and `cwd` the directory to start in there (both empty: neither).
 */
#include "spawner.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  size_t n = strlen(text);
  ssize_t w = write(fd, text, n);
  int e = w == (ssize_t)n ? 0 : w < 0 ? errno : EIO;
  close(fd);
  return e;
}

/** In a user namespace just made: `inside` is `outside` of the parent's (one id each), with no groups to set. */
static int map_ids(unsigned inside_uid, unsigned outside_uid, unsigned inside_gid, unsigned outside_gid) {
  char line[64];
  int e = write_file("/proc/self/setgroups", "deny");
  // A kernel before 3.19 has no setgroups file, and needs none.
  if (e != 0 && e != ENOENT) return e;
  snprintf(line, sizeof line, "%u %u 1\n", inside_uid, outside_uid);
  if ((e = write_file("/proc/self/uid_map", line)) != 0) return e;
  snprintf(line, sizeof line, "%u %u 1\n", inside_gid, outside_gid);
  return write_file("/proc/self/gid_map", line);
}

/**
 * The flags of the mount at `path` that a read-only remount must keep: in a user namespace they are locked, and a
 * remount that drops one fails with EPERM (mount(8) keeps them the same way).
 */
static unsigned long kept_flags(const char *path) {
  struct statvfs s;
  if (statvfs(path, &s) != 0) return 0;
  unsigned long f = 0;
  if (s.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (s.f_flag & ST_NODEV) f |= MS_NODEV;
  if (s.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (s.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (s.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (s.f_flag & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

int enter_namespace(const Strings *ns, const char **cwd) {
  if (ns->n < 4 || (ns->n - 4) % 3 != 0) return EINVAL;
  bool user = strcmp(ns->items[0], "user") == 0;
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWNS | (user ? CLONE_NEWUSER : 0)) != 0) return errno;
  int e;
  if (user && (e = map_ids(0, uid, 0, gid)) != 0) return e;
  // Nothing mounted here reaches the parent's namespace.
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return errno;
  for (size_t i = 4; i < ns->n; i += 3) {
    const char *kind = ns->items[i], *source = ns->items[i + 1], *target = ns->items[i + 2];
    bool ro = strcmp(kind, "ro") == 0, seal = strcmp(kind, "seal") == 0;
    if (strcmp(kind, "overlay") == 0) {
      if (mount("overlay", target, "overlay", 0, source) != 0) return errno;
    } else if (ro || strcmp(kind, "rw") == 0) {
      if (mount(source, target, NULL, MS_BIND, NULL) != 0) return errno;
    } else if (!seal) {
      return EINVAL;
    }
    if ((ro || seal) && mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | kept_flags(target), NULL) != 0)
      return errno;
  }
  const char *sandbox = ns->items[1], *root = ns->items[2];
  if (*sandbox != 0 && mount(sandbox, root, NULL, MS_BIND | MS_REC, NULL) != 0) return errno;
  if (user) {
    if (unshare(CLONE_NEWUSER) != 0) return errno;
    if ((e = map_ids(uid, 0, gid, 0)) != 0) return e;
  }
  if (*ns->items[3] != 0) *cwd = ns->items[3];
  return 0;
}
