/*
 * The network namespaces of the strict view (see ns.c), kept for reuse (#37). A view without the host's network
 * gets a namespace of its own with only its loopback; making one per process, and the kernel's tearing it down after,
 * is most of what the view costs beyond its mount namespace. So this spawner keeps them: a process is started in a
 * namespace no running process holds, and once its PID namespace is gone (its init, the reaper, has exited: every
 * process in it is dead, and their sockets closed) the namespace comes back here for the next one.
 *
 * As root, the spawner enters the namespace itself around the clone (`netpool_enter`, `netpool_leave`), and the clone
 * leaves out CLONE_NEWNET: the child starts in it. As another user the spawner can neither enter nor make a network
 * namespace (both take CAP_SYS_ADMIN in its own user namespace), and a view's own user namespace, a sibling of the
 * one that owns an earlier view's network namespace, holds no capability over it. So the pool's namespaces belong to
 * one user namespace of their own (`make_holder`, which maps the user to itself), over which the spawner, its owner
 * in the parent namespace, has every capability: a view's starter, forked plain, joins it, then a pooled network
 * namespace (or makes one there), and clones the view's reaper into the rest of its namespaces, its own user
 * namespace inside the pool's (`netpool_join`, spawner.c's `start_through_pool`). Where that user namespace cannot
 * be made, each view makes its own network namespace, as before.
 *
 * What a process leaves behind in its namespace is checked before it is used again (as root as it comes back,
 * `netpool_give`; as another user by the next starter, which cannot be the spawner): a TCP, UDP or raw socket of it
 * left (a TCP connection in TIME_WAIT holds its port), an interface beyond the loopback, an address or a route added, and the
 * namespace is dropped rather than reused. What else a process running as root may change in its namespace (firewall
 * rules, sysctls) is not checked; as another user a process holds no capability over it.
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
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define POOL_MAX 64

static int pool[POOL_MAX];
static size_t pool_n;
/** The spawner's own network namespace, to come back to; -1 until the first take. */
static int home = -1;
/** This process cannot make network namespaces (not root): every view makes its own. */
static bool unavailable;
/** As another user: the user namespace the pool's network namespaces belong to (see above); -1 until made. */
static int holder = -1;
static bool no_holder;

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

/** Lines of `path`, as `read_text` reads it; -1 if unreadable. */
static long lines_of(const char *path) {
  char text[1024];
  if (!read_text(path, text, sizeof text)) return -1;
  long lines = 0;
  for (const char *c = text; *c != 0; c++) lines += *c == '\n';
  return lines;
}

/** Whether every `inuse` and `tw` count in sockstat's `text` is 0 (and there is one). */
static bool no_sockets_in(const char *text) {
  bool counted = false;
  for (const char *c = text; (c = strstr(c, " ")) != NULL; c++) {
    if (strncmp(c + 1, "inuse ", 6) != 0 && strncmp(c + 1, "tw ", 3) != 0) continue;
    long n = strtol(strchr(c + 1, ' ') + 1, NULL, 10);
    if (n != 0) return false;
    counted = true;
  }
  return counted;
}

/**
 * In the namespace just left by its processes: no TCP, UDP or raw socket of it left (sockstat's counts are the
 * namespace's own), none in TIME_WAIT, which would hold its port; no interface but lo (dev's two lines of headers,
 * then lo), no address but lo's own (IPv4, and IPv6's ::1 in if_inet6) and no route (route's header) that root may
 * have added. Not its count of every socket: a netlink socket (`ip`, getaddrinfo) is freed after an RCU grace period,
 * and still counted just after its process is gone. Nor /proc/net/tcp: it walks the kernel's whole table of
 * connections, every namespace's.
 */
static bool left_clean(void) {
  char text[1024];
  if (!read_text("/proc/thread-self/net/sockstat", text, sizeof text) || !no_sockets_in(text)) return false;
  // Without IPv6 there is no sockstat6.
  if (read_text("/proc/thread-self/net/sockstat6", text, sizeof text) && !no_sockets_in(text)) return false;
  return lines_of("/proc/thread-self/net/dev") == 3 && lines_of("/proc/thread-self/net/route") == 1 &&
         lines_of("/proc/thread-self/net/if_inet6") <= 1 && only_loopback_address();
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
  // As another user this process cannot enter it to look: the next view's starter does (`netpool_join`).
  if (holder >= 0) {
    if (pool_n < POOL_MAX) pool[pool_n++] = fd;
    else close(fd);
    return;
  }
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
  if (holder >= 0) close(holder);
}

/**
 * The pool's user namespace, as another user: made by a child, which maps the user to itself there (so that a view's
 * own user namespace, made inside it, maps it back as before), and held by its descriptor once the child is gone.
 * This process, in the parent user namespace and the same user as its owner, has every capability in it: a child of
 * it that joins it may make and join network namespaces it owns.
 */
static bool make_holder(void) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return false;
  uid_t uid = getuid();
  gid_t gid = getgid();
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    int e = unshare(CLONE_NEWUSER) == 0 ? map_ids(uid, uid, gid, gid) : errno;
    ssize_t ignored = write(ready[1], &e, sizeof e);
    (void)ignored;
    // Until it is killed: its namespace is opened meanwhile.
    for (;;) pause();
  }
  close(ready[1]);
  int e = -1;
  bool made = pid > 0 && read(ready[0], &e, sizeof e) == (ssize_t)sizeof e && e == 0;
  close(ready[0]);
  if (made) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    holder = open(path, O_RDONLY | O_CLOEXEC);
  }
  if (pid > 0) {
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
  }
  return holder >= 0;
}

bool netpool_take(int *fd) {
  if (holder < 0 && (no_holder || !make_holder())) {
    no_holder = true;
    return false;
  }
  *fd = pool_n > 0 ? pool[--pool_n] : -1;
  return true;
}

int netpool_join(int fd, int *fresh) {
  *fresh = -1;
  if (setns(holder, CLONE_NEWUSER) != 0) return errno;
  if (fd >= 0 && setns(fd, CLONE_NEWNET) == 0 && left_clean() && loopback_up() == 0) return 0;
  // None free, or one an earlier process left something in: a new one, for the pool from now on.
  if (unshare(CLONE_NEWNET) != 0) return errno;
  int e = loopback_up();
  if (e != 0) return e;
  *fresh = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  return *fresh >= 0 ? 0 : errno;
}
