/*
 * The strict view's file system (see ns.c for the rest of the view): a root of the process's own, made in its mount
 * namespace and pivoted into, that holds only
 *
 * - the system's directories, read-only (`SYSTEM_DIRS`): the shell, the C library, the tools a build runs, and
 *   `/etc` for what they read there (passwd for a user's name, resolv.conf and hosts for names, ssl certificates);
 *   those that are symlinks (merged-/usr) are made as the same symlinks;
 * - the sandbox, read-write, with the mounts made inside it (shared trees, read-only), where the process sees it;
 * - a private, empty `/tmp` (a tmpfs of its own, gone with it);
 * - a minimal `/dev`: the host's null, zero, full, random, urandom and tty bound onto files of a small tmpfs, the
 *   fd, stdin, stdout and stderr links, and a `/dev/shm` of its own;
 * - its own `/proc`, of its PID namespace: only its own processes;
 * - each host path the process declares (and the tool directories of its PATH: see `runner/internal/strictView.ts`),
 *   read-only, at its own path; its named caches, read-write, at theirs (the sandbox links to them).
 *
 * Nothing else: no workspace, no home, no store, no other sandbox, no /run, /var, /mnt of the host. Everything bound
 * from the host is opened first (O_PATH) and bound through /proc/self/fd, so that the tmpfs the root is built in
 * hides none of them, wherever they are.
 */
#include "spawner.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/** Where the new root is built before the pivot: any directory will do, as nothing is bound from it by its path. */
#define STAGE "/tmp"

static const char *const SYSTEM_DIRS[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"};
#define SYSTEM_N (sizeof SYSTEM_DIRS / sizeof *SYSTEM_DIRS)
static const char *const DEVICES[] = {"null", "zero", "full", "random", "urandom", "tty"};
#define DEVICES_N (sizeof DEVICES / sizeof *DEVICES)

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

struct attr {
  unsigned long long set, clr, propagation, userns_fd;
};

/** The mount at `target` and those under it made read-only: mount_setattr(2) where the kernel has it (5.12). */
static int read_only(const char *target) {
#ifdef SYS_mount_setattr
  struct attr a = {MOUNT_ATTR_RDONLY, 0, 0, 0};
  if (syscall(SYS_mount_setattr, AT_FDCWD, target, AT_RECURSIVE, &a, sizeof a) == 0) return 0;
  if (errno != ENOSYS) return errno;
#endif
  return remount_read_only(target);
}

static int bind_fd(int fd, const char *target) {
  char source[64];
  snprintf(source, sizeof source, "/proc/self/fd/%d", fd);
  return mount(source, target, NULL, MS_BIND | MS_REC, NULL) == 0 ? 0 : errno;
}

/** `dir` (under the stage) and its parents, made where missing; a read-only parent that has them already is fine. */
static int make_dirs(char *dir) {
  struct stat st;
  if (lstat(dir, &st) == 0) return 0;
  for (char *slash = dir + strlen(STAGE) + 1; (slash = strchr(slash, '/')) != NULL; slash++) {
    *slash = 0;
    int e = mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : errno;
    *slash = '/';
    if (e != 0) return e;
  }
  return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : errno;
}

/** The mount point for `fd` at `at` (a directory, or a file for a file), made with its parents. */
static int mount_point(int fd, char *at) {
  struct stat st;
  if (fstat(fd, &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return make_dirs(at);
  if (lstat(at, &st) == 0) return 0;
  char *slash = strrchr(at, '/');
  *slash = 0;
  int e = make_dirs(at);
  *slash = '/';
  if (e != 0) return e;
  int made = open(at, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (made < 0) return errno;
  close(made);
  return 0;
}

static void staged(char *out, const char *path) { snprintf(out, PATH_MAX, STAGE "%s%s", *path == '/' ? "" : "/", path); }

/** Each host path opened before the stage hides any: its fd, or -1 (a system dir that is absent or a symlink). */
typedef struct {
  int system[SYSTEM_N];
  char links[SYSTEM_N][PATH_MAX];
  int devices[DEVICES_N];
  int sandbox;
  int *hosts;
} Opened;

static void close_all(Opened *o, size_t hosts_n) {
  for (size_t i = 0; i < SYSTEM_N; i++) if (o->system[i] >= 0) close(o->system[i]);
  for (size_t i = 0; i < DEVICES_N; i++) if (o->devices[i] >= 0) close(o->devices[i]);
  if (o->sandbox >= 0) close(o->sandbox);
  for (size_t i = 0; o->hosts != NULL && i < hosts_n; i++) if (o->hosts[i] >= 0) close(o->hosts[i]);
  free(o->hosts);
}

static int open_all(const View *v, Opened *o) {
  char path[PATH_MAX];
  for (size_t i = 0; i < SYSTEM_N; i++) {
    o->system[i] = -1;
    o->links[i][0] = 0;
    snprintf(path, sizeof path, "/%s", SYSTEM_DIRS[i]);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(path, o->links[i], PATH_MAX - 1);
      o->links[i][n > 0 ? n : 0] = 0;
    } else if (S_ISDIR(st.st_mode) && (o->system[i] = open(path, O_PATH | O_CLOEXEC)) < 0) {
      return errno;
    }
  }
  for (size_t i = 0; i < DEVICES_N; i++) {
    snprintf(path, sizeof path, "/dev/%s", DEVICES[i]);
    // A host without one (a container's /dev without a tty) gives the process none either.
    o->devices[i] = open(path, O_PATH | O_CLOEXEC);
  }
  if ((o->sandbox = open(v->sandbox, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) return errno;
  o->hosts = calloc(v->hosts_n == 0 ? 1 : v->hosts_n, sizeof *o->hosts);
  if (o->hosts == NULL) return ENOMEM;
  for (size_t i = 0; i < v->hosts_n; i++) o->hosts[i] = -1;
  for (size_t i = 0; i < v->hosts_n; i++) {
    if ((o->hosts[i] = open(v->hosts[i], O_PATH | O_CLOEXEC)) < 0) return errno;
  }
  return 0;
}

static int tmpfs(const char *target, const char *mode) {
  return mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, mode) == 0 ? 0 : errno;
}

static int make_dev(const Opened *o) {
  char at[PATH_MAX];
  int e;
  if (mkdir(STAGE "/dev", 0755) != 0) return errno;
  if (mount("tmpfs", STAGE "/dev", "tmpfs", MS_NOSUID, "mode=0755") != 0) return errno;
  for (size_t i = 0; i < DEVICES_N; i++) {
    if (o->devices[i] < 0) continue;
    snprintf(at, sizeof at, STAGE "/dev/%s", DEVICES[i]);
    int made = open(at, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (made < 0) return errno;
    close(made);
    if ((e = bind_fd(o->devices[i], at)) != 0) return e;
  }
  static const char *const LINKS[][2] = {
    {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}
  };
  for (size_t i = 0; i < sizeof LINKS / sizeof *LINKS; i++) {
    snprintf(at, sizeof at, STAGE "/dev/%s", LINKS[i][1]);
    if (symlink(LINKS[i][0], at) != 0) return errno;
  }
  if (mkdir(STAGE "/dev/shm", 01777) != 0) return errno;
  if ((e = tmpfs(STAGE "/dev/shm", "mode=1777")) != 0) return e;
  // Its files are made: nothing more is written there but in /dev/shm, a mount of its own.
  return mount(NULL, STAGE "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) == 0 ? 0 : errno;
}

static int populate(const View *v, const Opened *o) {
  char at[PATH_MAX];
  int e;
  for (size_t i = 0; i < SYSTEM_N; i++) {
    snprintf(at, sizeof at, STAGE "/%s", SYSTEM_DIRS[i]);
    if (o->links[i][0] != 0) {
      if (symlink(o->links[i], at) != 0) return errno;
    } else if (o->system[i] >= 0) {
      if (mkdir(at, 0755) != 0) return errno;
      if ((e = bind_fd(o->system[i], at)) != 0 || (e = read_only(at)) != 0) return e;
    }
  }
  if (mkdir(STAGE "/tmp", 01777) != 0) return errno;
  if ((e = tmpfs(STAGE "/tmp", "mode=1777")) != 0) return e;
  if ((e = make_dev(o)) != 0) return e;
  if (mkdir(STAGE "/proc", 0555) != 0) return errno;
  // Of the PID namespace this process is the init of: its own processes only.
  if (mount("proc", STAGE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) return errno;
  staged(at, v->at);
  if ((e = make_dirs(at)) != 0 || (e = bind_fd(o->sandbox, at)) != 0) return e;
  for (size_t i = 0; i < v->hosts_n; i++) {
    staged(at, v->hosts[i]);
    if ((e = mount_point(o->hosts[i], at)) != 0 || (e = bind_fd(o->hosts[i], at)) != 0) return e;
    if (!v->hosts_rw[i] && (e = read_only(at)) != 0) return e;
  }
  return 0;
}

int make_root(const View *v) {
  Opened o;
  memset(&o, 0, sizeof o);
  o.sandbox = -1;
  int e = open_all(v, &o);
  if (e == 0) e = mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0 ? 0 : errno;
  if (e == 0) e = populate(v, &o);
  close_all(&o, v->hosts_n);
  if (e != 0) return e;
  // The host's root, under the new one, then detached: nothing of it is left to reach.
  if (chdir(STAGE) != 0) return errno;
  if (syscall(SYS_pivot_root, ".", ".") != 0) return errno;
  if (umount2(".", MNT_DETACH) != 0) return errno;
  if (chdir("/") != 0) return errno;
  // The root itself takes no files: a write lands in the sandbox, /tmp or /dev/shm, or fails.
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) return errno;
  return 0;
}
