/*
 * The network namespaces of the strict view (see ns.c), kept for reuse (#37). A view without the host's network
 * gets a namespace of its own with only its loopback; making one per process, and the kernel's tearing it down after,
 * is most of what the view costs beyond its mount namespace. So this spawner keeps them: a process is started in a
 * namespace no running process holds, and once its PID namespace is gone (its init, the reaper, has exited: every
 * process in it is dead, and their sockets closed) the namespace comes back here for the next one.
 *
 * The spawner enters the namespace itself around the clone (`netpool_enter`, `netpool_leave`), and the clone leaves
 * out CLONE_NEWNET: the child starts in it whatever user namespace it makes, and as another user (mode `user`) it
 * holds no capability over it, since the namespace is the spawner's. Entering or making a network namespace takes
 * CAP_SYS_ADMIN in the spawner's own user namespace, which only root has: as another user the pool is empty for good
 * and each view makes its own namespace, as before. (A view's user namespace is a sibling of the one that made an
 * earlier namespace, so it cannot join that one either.)
 *
 * What a process leaves behind in its namespace is checked as it comes back (`netpool_give`): a TCP socket still
 * closing (TIME_WAIT holds the port) or an interface beyond the loopback, and the namespace is dropped rather than
 * reused. What root may change in a namespace it has (routes, firewall rules, sysctls) is not checked.
 *
 * The pool holds at most the namespaces the most processes running at once held (one is made only when none is
 * free), and `POOL_MAX`. Its descriptors close with the spawner, and are closed in every child it starts, so that
 * no process can reach another's namespace through its reaper's descriptors.
 */
#include "spawner.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POOL_MAX 64

static int pool[POOL_MAX];
static size_t pool_n;
/** The spawner's own network namespace, to come back to; -1 until the first take. */
static int home = -1;
/** This process cannot make network namespaces (not root): every view makes its own. */
static bool unavailable;

/** The text of `path` (of this thread's network namespace, under /proc/thread-self/net) into `buf`; false if unreadable. */
static bool read_text(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, buf + got, size - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) got += (size_t)n;
    if (n <= 0 || got == size - 1) {
      close(fd);
      buf[got] = 0;
      return n >= 0;
    }
  }
}

/**
 * In the namespace just left by its processes: no socket of it left anywhere (sockstat's counts are the namespace's
 * own), none in TIME_WAIT, which would hold its port, and no interface but lo (dev's two lines of headers, then lo).
 * Not /proc/net/tcp: it walks the kernel's whole table of connections, every namespace's.
 */
static bool left_clean(void) {
  char text[1024];
  long used, inuse, orphan, tw;
  if (!read_text("/proc/thread-self/net/sockstat", text, sizeof text) ||
      sscanf(text, "sockets: used %ld TCP: inuse %ld orphan %ld tw %ld", &used, &inuse, &orphan, &tw) != 4 ||
      used != 0 || inuse != 0 || tw != 0) {
    return false;
  }
  if (!read_text("/proc/thread-self/net/dev", text, sizeof text)) return false;
  long lines = 0;
  for (const char *c = text; *c != 0; c++) lines += *c == '\n';
  return lines == 3;
}

int netpool_enter(void) {
  if (unavailable) return -1;
  if (home < 0 && (home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
    unavailable = true;
    return -1;
  }
  if (pool_n > 0) {
    int fd = pool[--pool_n];
    if (setns(fd, CLONE_NEWNET) == 0) return fd;
    close(fd);
    return -1;
  }
  if (unshare(CLONE_NEWNET) != 0) {
    if (errno == EPERM) unavailable = true;
    return -1;
  }
  int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || loopback_up() != 0) {
    if (fd >= 0) close(fd);
    netpool_leave();
    return -1;
  }
  return fd;
}

void netpool_leave(void) {
  // Every later process would start in the wrong namespace: the host's network for one that asks for it.
  if (setns(home, CLONE_NEWNET) != 0) {
    perror("kiln-spawner: setns back to its own network namespace");
    _exit(70);
  }
}

void netpool_give(int fd) {
  if (fd < 0) return;
  if (pool_n == POOL_MAX || setns(fd, CLONE_NEWNET) != 0) {
    close(fd);
    return;
  }
  // The loopback up again, should its process have taken it down.
  bool clean = left_clean() && loopback_up() == 0;
  netpool_leave();
  if (clean) pool[pool_n++] = fd;
  else close(fd);
}

void netpool_close_in_child(void) {
  for (size_t i = 0; i < pool_n; i++) close(pool[i]);
  if (home >= 0) close(home);
}
