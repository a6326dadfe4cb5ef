/*
 * kiln's spawner, native: `kiln-spawner kiln-spawner <engine-pid>`. The same program as `../main.ts` (whose comment
 * is the contract), speaking the same protocol (`../protocol.ts`: one JSON object per line), built by
 * `scripts/spawnerNative.mjs` with the C compiler kiln's install already needs for LMDB.
 *
 * Why a C program: the spawner is a second process in every run that starts anything. As Node it costs a Node start
 * (40 ms of CPU on a 2-core machine, beside the engine's own start on an edit), 45 MB of resident memory (the node
 * binary's pages) and ~1 ms of event-loop work per process it forks. This costs none of those: it forks from a
 * process of a few hundred kilobytes, and sits in poll() otherwise.
 *
 * It is single-threaded: everything a child does between fork and exec is safe here.
 */
#include "spawner.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/** Signal names by number, as Node reports a child's `signal`. */
static const char *const SIGNALS[] = {
  NULL, "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1",
  "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP",
  "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGPWR",
  "SIGSYS"
};

/* ------------------------------------------------------------------------------------------------------------- */
/* Replies                                                                                                        */

static void end_all(void);

/** Writes a whole reply to the engine; a closed pipe is the engine gone. */
static void send_reply(Buf *b) {
  buf_add(b, "}\n", 2);
  size_t off = 0;
  while (off < b->n) {
    ssize_t w = write(STDOUT_FILENO, b->p + off, b->n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      // A pipe handed over non-blocking, and full: wait until the engine reads.
      if (errno == EAGAIN) {
        struct pollfd out = {STDOUT_FILENO, POLLOUT, 0};
        if (poll(&out, 1, -1) >= 0 || errno == EINTR) continue;
      }
      end_all();
    }
    off += (size_t)w;
  }
  free(b->p);
}

static Buf reply(const char *kind, long long id) {
  Buf b = {0};
  buf_str(&b, "{\"kind\":\"");
  buf_str(&b, kind);
  buf_str(&b, "\",\"id\":");
  buf_num(&b, id);
  return b;
}

/** `failed`, with Node's kind of message: `ENOENT: no such file or directory, open '/x'`. */
static void send_failed(long long id, int e, const char *what, const char *path) {
  Buf b = reply("failed", id);
  buf_str(&b, ",\"code\":");
  buf_json(&b, errno_name(e));
  Buf m = {0};
  buf_str(&m, errno_name(e));
  buf_str(&m, ": ");
  buf_str(&m, strerror(e));
  buf_str(&m, ", ");
  buf_str(&m, what);
  buf_str(&m, " '");
  buf_str(&m, path);
  buf_str(&m, "'");
  buf_add(&m, "", 1);
  buf_str(&b, ",\"message\":");
  buf_json(&b, m.p);
  free(m.p);
  send_reply(&b);
}

/* ------------------------------------------------------------------------------------------------------------- */
/* Starting processes                                                                                             */

static pid_t engine;

typedef struct {
  /** The process (its group's id), and its reaper (see reaper.c), this program's child, whose exit is the process's. */
  pid_t pid, reaper;
  long long id;
  /** A view's init writes the process's wait status here before it exits (see `reap_for`); else -1. */
  int status_fd;
  /** The pooled network namespace its view runs in (netpool.c), given back once the reaper is gone; else -1. */
  int net_fd;
} Child;

/** The processes started whose exit has not been seen: each leads its own group, whose id cannot be reused meanwhile. */
static Child *running;
static size_t running_n, running_cap;

/** What to start if the engine dies, from its last `arm`, until it says `disarm`. */
static Request armed;
static bool is_armed;

/** In a child before exec: signals as a fresh process has them (this one blocks some). */
static void reset_signals(void) {
  struct sigaction dfl = {0};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, NULL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/** Opens the child's output files, both or neither; 0, or the errno and which file failed. */
static int open_outputs(const Request *r, int fds[2], const char **failed) {
  fds[0] = open(r->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fds[0] < 0) {
    *failed = r->out;
    return errno;
  }
  fds[1] = open(r->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fds[1] < 0) {
    int e = errno;
    close(fds[0]);
    *failed = r->err;
    return e;
  }
  return 0;
}

/**
 * What a child is to become: its program, environment, directory, the mount namespace it runs in (or NULL), and
 * the strict view its reaper makes for it (or NULL; see ns.c).
 */
typedef struct {
  char *const *argv;
  char *const *env;
  const char *cwd;
  const Strings *namespace;
  const View *view;
  /** In a view's init: the write end the process's wait status goes to. */
  int status_fd;
  /** The process itself says it runs (REPORT_SELF): its pid in its namespace is not the spawner's. */
  bool report_self;
  /** The pooled network namespace the view was started in (netpool.c), the caller's to give back; else -1. */
  int net_fd;
  /** The process runs in a strict view: it starts without the capabilities caps.c drops. */
  bool in_view;
} Program;

/** In the forked child: becomes the process, or reports why it could not over `report` and exits 127. */
static void become(const Program *p, int out, int err, int report) {
  setsid();
  reset_signals();
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  int e = 0;
  const char *cwd = p->cwd;
  if (p->report_self) {
    Report m = {REPORT_SELF, 0};
    ssize_t ignored = write(report, &m, sizeof m);
    (void)ignored;
  }
  if (null < 0 || dup2(null, STDIN_FILENO) < 0) e = errno;
  if (e == 0 && dup2(out < 0 ? null : out, STDOUT_FILENO) < 0) e = errno;
  if (e == 0 && dup2(err, STDERR_FILENO) < 0) e = errno;
  if (e == 0 && p->namespace != NULL && (e = enter_namespace(p->namespace, &cwd)) != 0) {
    Report m = {REPORT_NAMESPACE_ERRNO, e};
    ssize_t ignored = write(report, &m, sizeof m);
    (void)ignored;
    _exit(127);
  }
  if (e == 0 && cwd != NULL && chdir(cwd) != 0) e = errno;
  if (e == 0 && p->in_view) e = drop_capabilities();
  if (e == 0) e = exec_in(p->argv, p->env);
  Report m = {REPORT_ERRNO, e};
  ssize_t ignored = write(report, &m, sizeof m);
  (void)ignored;
  _exit(127);
}

static int signal_fd = -1;

/** This program's marker argument (`kiln-spawner`), in its own argv: what ps and /proc/<pid>/cmdline show. */
static char *marker;


/**
 * In the forked reaper: the process's parent, and a child subreaper, so that whatever the process leaves behind
 * (a daemon that called setsid, a double fork) becomes its child, and dies once the process has exited. It holds
 * nothing of the engine's: not its pipes, nor this program's descriptors.
 */
static void become_reaper(const Program *p, int out, int err, int report) {
  // Told apart from the spawner in ps (and by whoever looks for the engine's spawner by its arguments).
  if (marker != NULL && strlen(marker) == strlen("kiln-reaper") + 1) memcpy(marker, "kiln-reaper", sizeof "kiln-reaper");
  int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2 && null >= 0; fd++) dup2(null, fd);
  if (null > 2) close(null);
  if (signal_fd >= 0) close(signal_fd);
  // A reaper never execs, so close-on-exec does not close these: the process could read them through /proc/1/fd
  // (its reaper is PID 1 of a view), and join another process's network namespace, or read another's status.
  netpool_close_in_child();
  for (size_t i = 0; i < running_n; i++) {
    if (running[i].net_fd >= 0) close(running[i].net_fd);
    if (running[i].status_fd >= 0) close(running[i].status_fd);
  }
  // A kernel without it (before 3.4) still runs the process: only what leaves its group outlives it there.
  (void)subreaper();
  Program inner = *p;
  if (p->view != NULL) {
    // PID 1 of the view's namespaces: it makes the view, then the process runs in it as its child.
    int e = enter_view(p->namespace, p->view, &inner.cwd);
    if (e != 0) {
      Report m = {REPORT_NAMESPACE_ERRNO, e};
      ssize_t ignored = write(report, &m, sizeof m);
      (void)ignored;
      _exit(127);
    }
    inner.namespace = NULL;
    inner.view = NULL;
    inner.report_self = true;
    inner.in_view = true;
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (inner.status_fd >= 0) close(inner.status_fd);
    become(&inner, out, err, report);
  }
  int e = pid < 0 ? errno : 0;
  if (e != 0 || p->view == NULL) {
    Report m = e != 0 ? (Report){REPORT_ERRNO, e} : (Report){REPORT_PID, pid};
    ssize_t ignored = write(report, &m, sizeof m);
    (void)ignored;
  }
  close(report);
  close(out);
  close(err);
  if (e != 0) _exit(127);
  reap_for(pid, p->view != NULL ? p->status_fd : -1);
}

/**
 * In a view's starter, as another user, forked plain (see netpool.c): joins the pool's user namespace and a network
 * namespace of it, then clones the view's reaper into the rest of its namespaces as the spawner's own child
 * (CLONE_PARENT), and says which it is, and the network namespace it made if it made one.
 */
static _Noreturn void start_through_pool(Program *p, unsigned long flags, int out, int err, int report) {
  int fresh = -1;
  int e = netpool_join(p->net_fd, &fresh);
  if (p->net_fd >= 0) close(p->net_fd);
  if (e == 0 && fresh >= 0) e = send_report_fd(report, (Report){REPORT_NETNS, 0}, fresh);
  pid_t pid = e == 0 ? (pid_t)syscall(SYS_clone, CLONE_PARENT | flags | SIGCHLD, NULL, NULL, NULL, NULL) : -1;
  if (pid == 0) {
    if (fresh >= 0) close(fresh);
    become_reaper(p, out, err, report);
  }
  if (pid < 0 && e == 0) e = errno;
  Report m = e != 0 ? (Report){REPORT_NAMESPACE_ERRNO, e} : (Report){REPORT_REAPER, pid};
  ssize_t ignored = write(report, &m, sizeof m);
  (void)ignored;
  _exit(0);
}

/**
 * Forks `argv` in a session of its own (its pid is its group), stdin /dev/null and stdout, stderr on `out`, `err`,
 * in `cwd` (or here, if NULL), with exactly `env`. Returns its pid once it runs its program, or -errno if it could
 * not: the child reports a failed chdir or exec over a close-on-exec pipe that exec itself closes. With `reaper`,
 * it is forked by a reaper of its own (see reaper.c), this program's child, whose pid is put there. `*in_namespace`
 * (when given) says whether what failed was entering its mount namespace.
 */
static pid_t start_child(Program *p, int out, int err, pid_t *reaper, bool *in_namespace) {
  // A socket rather than a pipe: a view's process is in a PID namespace of its own, and the kernel says its pid here.
  int report[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, report) != 0) return -errno;
  int on = 1;
  if (setsockopt(report[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    int e = errno;
    close(report[0]);
    close(report[1]);
    return -e;
  }
  int status[2] = {-1, -1};
  if (p->view != NULL && pipe2(status, O_CLOEXEC) != 0) {
    int e = errno;
    close(report[0]);
    close(report[1]);
    return -e;
  }
  p->status_fd = status[1];
  // A view without the host's network starts in a pooled namespace (netpool.c): as root this process is in it until
  // the clone is done; as another user a starter forked plain joins it (or makes one) and clones the reaper.
  p->net_fd = p->view != NULL && !p->view->network ? netpool_enter() : -1;
  bool through_pool = p->net_fd < 0 && p->view != NULL && !p->view->network && p->view->user && netpool_take(&p->net_fd);
  bool pooled = p->net_fd >= 0 || through_pool;
  unsigned long flags = p->view != NULL ? view_clone_flags(p->view) & ~(pooled ? CLONE_NEWNET : 0) : 0;
  // The view's reaper is cloned into its namespaces, PID 1 there: single-threaded, this is fork with flags.
  pid_t pid = p->view != NULL && !through_pool ? (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL)
                                               : fork();
  int clone_errno = errno;
  if (pid != 0 && p->net_fd >= 0 && !through_pool) netpool_leave();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    if (status[0] >= 0) close(status[0]);
    if (status[1] >= 0) close(status[1]);
    netpool_give(p->net_fd);
    p->net_fd = -1;
    return -clone_errno;
  }
  if (pid == 0) {
    close(report[0]);
    if (status[0] >= 0) close(status[0]);
    if (through_pool) start_through_pool(p, flags, out, err, report[1]);
    if (p->net_fd >= 0) close(p->net_fd);
    if (reaper != NULL) become_reaper(p, out, err, report[1]);
    become(p, out, err, report[1]);
  }
  close(report[1]);
  if (status[1] >= 0) close(status[1]);
  p->status_fd = status[0];
  // Until every writer is gone: the reaper names the process; the process closes its end by exec, or says why not.
  pid_t child = reaper != NULL ? 0 : pid;
  // Through the pool, the reaper is the starter's clone (this process's child all the same), which it names.
  pid_t started = through_pool ? 0 : pid;
  int e = 0;
  for (;;) {
    Report m;
    pid_t sender;
    int passed;
    if (!read_report(report[0], &m, &sender, &passed)) break;
    if (m.kind == REPORT_PID) {
      child = m.value;
    } else if (m.kind == REPORT_SELF) {
      child = sender;
    } else if (m.kind == REPORT_REAPER) {
      started = m.value;
    } else if (m.kind == REPORT_NETNS) {
      // The starter made it: the one taken from the pool (if any) held something of an earlier process's, and goes.
      if (passed >= 0 && p->net_fd >= 0) close(p->net_fd);
      if (passed >= 0) p->net_fd = passed;
    } else {
      // The reaper's pid may come after the process's errno: only the errno says where it failed.
      e = m.value;
      if (in_namespace != NULL) *in_namespace = m.kind == REPORT_NAMESPACE_ERRNO;
    }
  }
  close(report[0]);
  // The starter has said all it will: it exits.
  if (through_pool) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
  }
  // A starter that could not name the reaper leaves a process this one could not tell the exit of: it is ended, and
  // its network namespace, which it may still be in, is not reused.
  if (e == 0 && child > 0 && started <= 0) {
    kill(-child, SIGKILL);
    if (p->net_fd >= 0) close(p->net_fd);
    p->net_fd = -1;
  }
  if (e != 0 || child <= 0 || started <= 0) {
    while (started > 0 && waitpid(started, NULL, 0) < 0 && errno == EINTR) {}
    if (p->status_fd >= 0) close(p->status_fd);
    p->status_fd = -1;
    // Its reaper is gone, and with it the PID namespace: nothing holds the network namespace any more.
    netpool_give(p->net_fd);
    p->net_fd = -1;
    return -(e != 0 ? e : ECHILD);
  }
  if (reaper != NULL) *reaper = started;
  return child;
}

static void start_post_mortem(void) {
  int log = open(armed.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (log < 0) log = open("/dev/null", O_WRONLY | O_CLOEXEC);
  // Nothing is left to tell if it fails: the engine is gone, and this process's stderr with it.
  Program p = {armed.argv.items, environ, NULL, NULL, NULL, -1, false, -1, false};
  start_child(&p, -1, log, NULL, NULL);
}

/** The engine is gone: what it started dies with it, and its post-mortem cleans up after it. */
static void end_all(void) {
  for (size_t i = 0; i < running_n; i++) kill(-running[i].pid, SIGKILL);
  if (is_armed) start_post_mortem();
  _exit(0);
}

static void spawn_request(const Request *r) {
  // Requests the engine wrote just before it died are not started: its sandboxes are being removed.
  if (getppid() != engine) end_all();
  // Nor is one whose sandbox is gone: its output files would be left beside nothing.
  struct stat st;
  if (stat(r->cwd, &st) != 0) {
    Buf b = reply("failed", r->id);
    buf_str(&b, ",\"code\":\"ENOENT\",\"message\":");
    Buf m = {0};
    buf_str(&m, "no such directory: ");
    buf_str(&m, r->cwd);
    buf_add(&m, "", 1);
    buf_json(&b, m.p);
    free(m.p);
    return send_reply(&b);
  }
  int fds[2] = {-1, -1};
  const char *which = NULL;
  int e = open_outputs(r, fds, &which);
  if (e != 0) return send_failed(r->id, e, "open", which);
  static char *no_env[] = {NULL};
  pid_t reaper = 0;
  View view = {0};
  if (r->has_namespace && !view_of(&r->namespace, &view)) {
    free(view.hosts);
    free(view.hosts_rw);
    close(fds[0]);
    close(fds[1]);
    return send_failed(r->id, EINVAL, "read the view of", r->argv.items[0]);
  }
  view.uid = getuid();
  view.gid = getgid();
  Program p = {
    r->argv.items, r->env.n == 0 ? no_env : r->env.items, r->cwd, r->has_namespace ? &r->namespace : NULL,
    view.on ? &view : NULL, -1, false, -1, false
  };
  bool in_namespace = false;
  pid_t pid = start_child(&p, fds[0], fds[1], &reaper, &in_namespace);
  free(view.hosts);
  free(view.hosts_rw);
  close(fds[0]);
  close(fds[1]);
  if (pid < 0 && in_namespace) return send_failed(r->id, (int)-pid, "enter the mount namespace of", r->argv.items[0]);
  if (pid < 0) return send_failed(r->id, (int)-pid, "spawn", r->argv.items[0]);
  if (running_n == running_cap) {
    running_cap = running_cap == 0 ? 16 : running_cap * 2;
    running = realloc(running, running_cap * sizeof *running);
    if (running == NULL) _exit(70);
  }
  running[running_n++] = (Child){pid, reaper, r->id, p.status_fd, p.net_fd};
  Buf b = reply("started", r->id);
  buf_str(&b, ",\"pid\":");
  buf_num(&b, pid);
  send_reply(&b);
}

/** Reaps every child that exited, and tells the engine of those it asked for. */
static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < running_n; i++) {
      if (running[i].reaper != pid) continue;
      long long id = running[i].id;
      pid_t group = running[i].pid;
      int status_fd = running[i].status_fd;
      // The reaper was PID 1 of the view's PID namespace: its exit ended every process in it.
      netpool_give(running[i].net_fd);
      running[i] = running[--running_n];
      // A view's init (PID 1 of its namespace) exits 0 having written the process's status: it is the process's.
      if (status_fd >= 0) {
        int st;
        if (read(status_fd, &st, sizeof st) == (ssize_t)sizeof st) status = st;
        close(status_fd);
      }
      // Whether nothing of the group is left: the common answer, yes, saves the engine a check of its own.
      bool alone = kill(-group, 0) != 0 && errno == ESRCH;
      Buf b = reply("exited", id);
      buf_str(&b, ",\"code\":");
      if (WIFEXITED(status)) buf_num(&b, WEXITSTATUS(status));
      else buf_str(&b, "null");
      buf_str(&b, ",\"signal\":");
      int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      if (sig > 0 && sig < (int)(sizeof SIGNALS / sizeof *SIGNALS)) buf_json(&b, SIGNALS[sig]);
      else buf_str(&b, "null");
      buf_str(&b, alone ? ",\"alone\":true" : ",\"alone\":false");
      send_reply(&b);
      break;
    }
  }
}

static void remove_request(const Request *r) {
  Failure f = {0};
  for (size_t i = 0; i < r->paths.n; i++) {
    const char *target = r->paths.items[i];
    struct stat st;
    Buf at = {0};
    // What a process mounted in its sandbox (as root) is not the sandbox's to delete: see `Mounts.ts`.
    if (lstat(target, &st) == 0 && S_ISDIR(st.st_mode) && mount_under(target, &at)) {
      Buf b = reply("failed", r->id);
      buf_str(&b, ",\"code\":\"EBUSY\",\"message\":");
      Buf m = {0};
      buf_str(&m, "a file system is mounted at ");
      buf_str(&m, at.p);
      buf_str(&m, ": left in place, with what is under it");
      buf_add(&m, "", 1);
      buf_json(&b, m.p);
      free(m.p);
      free(at.p);
      return send_reply(&b);
    }
    free(at.p);
    if (!remove_tree(target, &f)) {
      send_failed(r->id, f.code, f.op, f.path.p);
      free(f.path.p);
      return;
    }
  }
  free(f.path.p);
  Buf b = reply("removed", r->id);
  send_reply(&b);
}

/* ------------------------------------------------------------------------------------------------------------- */
/* The loop                                                                                                       */

/** Requests read so far: a request is named by its line's number where its id cannot be read. */
static long long lines_read;

/**
 * A request this program cannot use is answered all the same, by its line's number (its id may be what is wrong):
 * the engine fails the request it wrote on that line, where a request dropped in silence left it waiting for good.
 */
static void send_rejected(long long line_no, const char *why, const char *line, size_t n) {
  Buf m = {0};
  buf_str(&m, why);
  buf_str(&m, " in the request ");
  // Its start, as printable ASCII: enough to recognise it, and valid JSON text whatever bytes it held.
  size_t shown = n > 120 ? 120 : n;
  for (size_t i = 0; i < shown; i++) {
    char c = line[i] >= 0x20 && line[i] < 0x7f ? line[i] : '?';
    buf_add(&m, &c, 1);
  }
  if (n > shown) buf_str(&m, "...");
  buf_add(&m, "", 1);
  Buf b = {0};
  buf_str(&b, "{\"kind\":\"rejected\",\"line\":");
  buf_num(&b, line_no);
  buf_str(&b, ",\"reason\":");
  buf_json(&b, m.p);
  free(m.p);
  send_reply(&b);
}

static void on_line(const char *line, size_t n) {
  long long line_no = lines_read++;
  Request r = {0};
  const char *malformed = parse(line, n, &r);
  if (malformed != NULL) {
    request_free(&r);
    return send_rejected(line_no, malformed, line, n);
  }
  if (strcmp(r.kind, "spawn") == 0) spawn_request(&r);
  else if (strcmp(r.kind, "remove") == 0) remove_request(&r);
  else if (strcmp(r.kind, "arm") == 0) {
    if (is_armed) request_free(&armed);
    armed = r;
    is_armed = true;
    return;
  } else if (strcmp(r.kind, "disarm") == 0) {
    if (is_armed) request_free(&armed);
    is_armed = false;
  }
  request_free(&r);
}

/**
 * Closes every descriptor but stdin, stdout and stderr: whatever the engine's own parent leaked into it (a shell's
 * saved descriptors, a pipe) must not reach the processes started here, whose sandbox is all they may see.
 */
static void close_inherited(void) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
#endif
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return;
  int own = dirfd(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int fd = atoi(e->d_name);
    if (fd > 2 && fd != own) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  closedir(d);
}

int main(int argc, char **argv) {
  char *stop = NULL;
  long pid = argc >= 3 ? strtol(argv[argc - 1], &stop, 10) : 0;
  if (argc < 3 || strcmp(argv[argc - 2], "kiln-spawner") != 0 || *stop != 0 || pid <= 0) {
    fputs("kiln-spawner: expected the arguments \"kiln-spawner <engine-pid>\"\n", stderr);
    return 2;
  }
  engine = (pid_t)pid;
  marker = argv[argc - 2];
  close_inherited();
  // The engine ends the groups it started: SIGINT, SIGTERM and SIGHUP are not this process's to act on. SIGCHLD is
  // read from a signalfd; a write to an engine that is gone fails with EPIPE instead of killing this process.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sfd = signal_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    perror("kiln-spawner: signalfd");
    return 70;
  }
  Buf in = {0};
  size_t start = 0;
  for (;;) {
    struct pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      end_all();
    }
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) > 0) {}
      reap();
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      buf_reserve(&in, 65536);
      ssize_t got = read(STDIN_FILENO, in.p + in.n, in.cap - in.n);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      // The engine closed its end, or is gone.
      if (got <= 0) end_all();
      in.n += (size_t)got;
      for (char *nl; (nl = memchr(in.p + start, '\n', in.n - start)) != NULL;) {
        on_line(in.p + start, (size_t)(nl - (in.p + start)));
        start = (size_t)(nl - in.p) + 1;
      }
      memmove(in.p, in.p + start, in.n - start);
      in.n -= start;
      start = 0;
    }
  }
}

