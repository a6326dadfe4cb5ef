/*
 * What the spawner's children do to start (exec.c): the program looked up in the child's own PATH, and the reports a
 * reaper and its process send the spawner as they start, read with the sender's pid. See spawner.c.
 */
#include "spawner.h"
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *env_get(char *const *env, const char *name) {
  size_t n = strlen(name);
  for (; env != NULL && *env != NULL; env++) {
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  }
  return NULL;
}

/**
 * execvp with the child's own PATH, as Node (libuv) does: a name without a slash is looked up in `env`'s PATH, or
 * /usr/bin:/bin without one. Returns the errno that ends the search.
 */
int exec_in(char *const *argv, char *const *env) {
  const char *file = argv[0];
  if (*file == 0) return ENOENT;
  if (strchr(file, '/') != NULL) {
    execve(file, argv, env);
    return errno;
  }
  const char *path = env_get(env, "PATH");
  if (path == NULL) path = "/usr/bin:/bin";
  int last = ENOENT;
  bool denied = false;
  char full[4096];
  for (const char *p = path;; p++) {
    const char *colon = strchr(p, ':');
    size_t dir = colon == NULL ? strlen(p) : (size_t)(colon - p);
    if (dir + 1 + strlen(file) < sizeof full) {
      memcpy(full, p, dir);
      size_t at = dir;
      if (dir > 0) full[at++] = '/';
      strcpy(full + at, file);
      execve(full, argv, env);
      last = errno;
      if (last == EACCES) denied = true;
      else if (last != ENOENT && last != ENOTDIR) return last;
    }
    if (colon == NULL) break;
    p = colon;
  }
  return denied ? EACCES : last;
}

/**
 * The next report from a reaper or its process; false once every writer is gone. `*sender` is the pid (as this
 * program sees it) of the process that wrote it, from the credentials the kernel attaches.
 */
bool read_report(int fd, Report *m, pid_t *sender, int *passed) {
  union {
    char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  for (;;) {
    struct iovec io = {m, sizeof *m};
    struct msghdr h = {0};
    h.msg_iov = &io;
    h.msg_iovlen = 1;
    h.msg_control = control.buf;
    h.msg_controllen = sizeof control.buf;
    ssize_t n = recvmsg(fd, &h, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n != (ssize_t)sizeof *m) return false;
    *sender = 0;
    *passed = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c != NULL; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        struct ucred cred;
        memcpy(&cred, CMSG_DATA(c), sizeof cred);
        *sender = cred.pid;
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        memcpy(passed, CMSG_DATA(c), sizeof *passed);
      }
    }
    return true;
  }
}

int send_report_fd(int fd, Report m, int passed) {
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec io = {&m, sizeof m};
  struct msghdr h = {0};
  h.msg_iov = &io;
  h.msg_iovlen = 1;
  h.msg_control = control.buf;
  h.msg_controllen = sizeof control.buf;
  struct cmsghdr *c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &passed, sizeof passed);
  for (;;) {
    if (sendmsg(fd, &h, 0) == (ssize_t)sizeof m) return 0;
    if (errno != EINTR) return errno;
  }
}

