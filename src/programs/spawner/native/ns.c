/*
 * The mount namespace a process runs in, when its spawn request names one (`namespace`): what
 * `src/os/mounts/MountNamespace.ts`'s wrapper does with unshare(1), sh and mount(8), done here with the system calls in the
 * forked child, before it execs. Three programs fewer per process, and a program that cannot run is reported as one
 * (ENOENT, ETXTBSY retried), not as a shell's exit 127.
 *
 * `namespace` is [mode, sandbox, root, cwd, kind, source, target, kind, source, target, …]: mode `root` (a mount
 * namespace is enough) or `user` (a user namespace to mount in, and a second one inside it that maps the user back to
 * itself, so that the mounts are locked for the process); each mount made in turn by its kind (`ro`: source bound
 * read-only over target; `overlay`: an overlay with the options source; `rw`: source bound read-write; `seal`: the
 * mount at target made read-only, those under it staying as they are); then the sandbox (with those mounts inside
 * it) bound over `root`, and `cwd` the directory to start in there (both empty: neither).
 *
 * Two kinds are not mounts but the strict view (`MountNamespace.View`): `view` (source `net` for the host's network,
 * target unused) asks for it, and each `host` (source and target the path) is a host path it shows read-only, each
 * `hostrw` one it shows read-write (a named cache); a view always names its sandbox and root. With a view, the spawner clones the process's reaper into new PID, mount, IPC
 * and network namespaces (and a user namespace as another user), where it is PID 1 (spawner.c); the reaper makes the
 * mounts above, then the new root (root.c: the sandbox shown at `root`) and the loopback (net.c), and forks the
 * process in there. The network namespace is mostly one an earlier process had, kept once it was gone (netpool.c):
 * the reaper then starts in it rather than in one of its own.
 */
#include "spawner.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
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

int map_ids(unsigned inside_uid, unsigned outside_uid, unsigned inside_gid, unsigned outside_gid) {
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

int remount_read_only(const char *path) {
  return mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | kept_flags(path), NULL) == 0 ? 0 : errno;
}

static bool well_formed(const Strings *ns) { return ns->n >= 4 && (ns->n - 4) % 3 == 0; }

/** The mounts of the triples, in turn (the view's own kinds skipped). */
static int mount_all(const Strings *ns) {
  for (size_t i = 4; i < ns->n; i += 3) {
    const char *kind = ns->items[i], *source = ns->items[i + 1], *target = ns->items[i + 2];
    bool ro = strcmp(kind, "ro") == 0, seal = strcmp(kind, "seal") == 0;
    if (strcmp(kind, "view") == 0 || strcmp(kind, "host") == 0 || strcmp(kind, "hostrw") == 0) continue;
    if (strcmp(kind, "overlay") == 0) {
      if (mount("overlay", target, "overlay", 0, source) != 0) return errno;
    } else if (ro || strcmp(kind, "rw") == 0) {
      if (mount(source, target, NULL, MS_BIND, NULL) != 0) return errno;
    } else if (!seal) {
      return EINVAL;
    }
    int e;
    if ((ro || seal) && (e = remount_read_only(target)) != 0) return e;
  }
  return 0;
}

/** The user back as itself, in a user namespace inside the one that mounted: the mounts are locked for it. */
static int map_back(uid_t uid, gid_t gid) {
  if (unshare(CLONE_NEWUSER) != 0) return errno;
  return map_ids(uid, 0, gid, 0);
}

int enter_namespace(const Strings *ns, const char **cwd) {
  if (!well_formed(ns)) return EINVAL;
  bool user = strcmp(ns->items[0], "user") == 0;
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWNS | (user ? CLONE_NEWUSER : 0)) != 0) return errno;
  int e;
  if (user && (e = map_ids(0, uid, 0, gid)) != 0) return e;
  // Nothing mounted here reaches the parent's namespace.
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return errno;
  if ((e = mount_all(ns)) != 0) return e;
  const char *sandbox = ns->items[1], *root = ns->items[2];
  if (*sandbox != 0 && mount(sandbox, root, NULL, MS_BIND | MS_REC, NULL) != 0) return errno;
  if (user && (e = map_back(uid, gid)) != 0) return e;
  if (*ns->items[3] != 0) *cwd = ns->items[3];
  return 0;
}

bool view_of(const Strings *ns, View *v) {
  memset(v, 0, sizeof *v);
  if (!well_formed(ns)) return false;
  for (size_t i = 4; i < ns->n; i += 3) {
    const char *kind = ns->items[i];
    if (strcmp(kind, "view") == 0) {
      v->on = true;
      v->network = strcmp(ns->items[i + 1], "net") == 0;
    } else if (strcmp(kind, "host") == 0 || strcmp(kind, "hostrw") == 0) {
      // Pointers into the strings, which outlive the view.
      const char **grown = realloc(v->hosts, (v->hosts_n + 1) * sizeof *grown);
      if (grown == NULL) return false;
      v->hosts = grown;
      bool *rw = realloc(v->hosts_rw, (v->hosts_n + 1) * sizeof *rw);
      if (rw == NULL) return false;
      v->hosts_rw = rw;
      v->hosts_rw[v->hosts_n] = strcmp(kind, "hostrw") == 0;
      v->hosts[v->hosts_n++] = ns->items[i + 2];
    }
  }
  if (!v->on) return true;
  v->user = strcmp(ns->items[0], "user") == 0;
  v->sandbox = ns->items[1];
  v->at = ns->items[2];
  // Paths the root is built from are absolute; a relative one would be looked up wherever the init stands.
  if (*v->sandbox != '/' || *v->at != '/') return false;
  for (size_t i = 0; i < v->hosts_n; i++) {
    if (*v->hosts[i] != '/') return false;
  }
  return true;
}

unsigned long view_clone_flags(const View *v) {
  return CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | (v->network ? 0 : CLONE_NEWNET) | (v->user ? CLONE_NEWUSER : 0);
}

int enter_view(const Strings *ns, const View *v, const char **cwd) {
  int e;
  // The ids the spawner had: in a user namespace just made, getuid() gives the overflow id until it is mapped.
  if (v->user && (e = map_ids(0, v->uid, 0, v->gid)) != 0) return e;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return errno;
  if ((e = mount_all(ns)) != 0) return e;
  if ((e = make_root(v)) != 0) return e;
  if (!v->network && (e = loopback_up()) != 0) return e;
  if (v->user && (e = map_back(v->uid, v->gid)) != 0) return e;
  if (*ns->items[3] != 0) *cwd = ns->items[3];
  return 0;
}
