/*
 * `dist/kiln`: the `kiln` command, as a small native program that hands a `kiln run` to the standby engine of its
 * build (`src/programs/kiln/standby/`) without starting Node, whose start alone is most of a no-op run. It says
 * exactly what the Node loader's client (`standby/client.ts`) says, on the same socket, and takes the same answers;
 * anything short of a standby taking the run on (another command, standbys off, none waiting, a declined request,
 * text it cannot pass on exactly) runs `node dist/cli.cjs` with the same arguments, which then does all it would have.
 *
 * What it trusts: only a socket in this user's runtime directory (`$XDG_RUNTIME_DIR/kiln`, the user's and writable
 * by nobody else) whose peer is a process of this user (`SO_PEERCRED`): a request carries the whole environment.
 * What it reads from the socket is bounded as the Node client bounds it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* As in protocol.ts. */
#define ACCEPTED 0x41
#define DECLINED 0x44
#define STDOUT_FRAME 0x4f
#define STDERR_FRAME 0x45
#define EXITED 0x58
#define MAX_FRAME_BYTES (16u * 1024 * 1024)
#define MAX_REASON_BYTES 4096
#define MAX_SOCKET_PATH 107

static int debug_on = 0;
static struct timespec started;

static void debug(const char *what, const char *detail) {
  if (!debug_on) return;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long ms = (now.tv_sec - started.tv_sec) * 1000 + (now.tv_nsec - started.tv_nsec) / 1000000;
  fprintf(stderr, "kiln: standby: %s%s (%ld ms)\n", what, detail, ms);
}

/* ------------------------------------------------------------------------------------------------------------- */
/* Growing text                                                                                                   */

typedef struct {
  char *p;
  size_t n, cap;
} Text;

static void add(Text *t, const char *s, size_t n) {
  if (t->n + n + 1 > t->cap) {
    size_t cap = t->cap == 0 ? 4096 : t->cap;
    while (cap < t->n + n + 1) cap *= 2;
    char *p = realloc(t->p, cap);
    if (p == NULL) {
      fputs("kiln: out of memory\n", stderr);
      exit(70);
    }
    t->p = p;
    t->cap = cap;
  }
  memcpy(t->p + t->n, s, n);
  t->n += n;
  t->p[t->n] = 0;
}

static void adds(Text *t, const char *s) { add(t, s, strlen(s)); }

/*
 * `s` as a JSON string, or 0 when it is not UTF-8: Node would decode it with replacement characters, which this
 * program does not imitate (Node's own client then sends it).
 */
static int add_json(Text *t, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  adds(t, "\"");
  for (size_t i = 0; u[i] != 0;) {
    unsigned c = u[i];
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        char e[2] = {'\\', (char)c};
        add(t, e, 2);
      } else if (c < 0x20) {
        char e[8];
        snprintf(e, sizeof e, "\\u%04x", c);
        adds(t, e);
      } else {
        add(t, (const char *)&u[i], 1);
      }
      i++;
      continue;
    }
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0) return 0;
    uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < len; k++) {
      if ((u[i + k] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) {
      return 0;
    }
    add(t, (const char *)&u[i], len);
    i += len;
  }
  adds(t, "\"");
  return 1;
}

/* ------------------------------------------------------------------------------------------------------------- */
/* The standby's key (protocol.ts `keyOf`): the bundle's and Node's identity, and Node's options                   */

typedef struct {
  uint32_t a, b;
} NameHash;

static void hash_unit(NameHash *h, uint32_t unit) {
  h->a = (h->a ^ unit) * 0x01000193u;
  h->b = (h->b ^ unit) * 0x5bd1e995u;
}

/* `nameHash` hashes UTF-16 code units: the bytes (UTF-8, checked by the request's encoding) decoded to them. */
static void hash_text(NameHash *h, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; u[i] != 0;) {
    unsigned c = u[i];
    size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    uint32_t cp = len == 1 ? c : c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    size_t k = 1;
    for (; k < len && u[i + k] != 0; k++) cp = (cp << 6) | (u[i + k] & 0x3f);
    i += k;
    if (cp >= 0x10000) {
      hash_unit(h, 0xd800 + ((cp - 0x10000) >> 10));
      hash_unit(h, 0xdc00 + ((cp - 0x10000) & 0x3ff));
    } else {
      hash_unit(h, cp);
    }
  }
}

static int identity(Text *t, const char *file) {
  struct stat st;
  if (stat(file, &st) != 0) return 0;
  char tail[96];
  snprintf(tail, sizeof tail, ":%lld:%llu", (long long)st.st_size,
           (unsigned long long)st.st_mtim.tv_sec * 1000000000ull + (unsigned long long)st.st_mtim.tv_nsec);
  adds(t, file);
  adds(t, tail);
  return 1;
}

/* A small file's whole text (a `/proc` file, the build's id) added to `t`; 0 when it cannot be read or is larger. */
static int add_file(Text *t, const char *file) {
  int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return 0;
  char buf[65536];
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      close(fd);
      return 0;
    }
    if (r == 0) break;
    n += (size_t)r;
    if (n == sizeof buf - 1) {
      close(fd);
      return 0;
    }
  }
  close(fd);
  if (memchr(buf, 0, n) != NULL) return 0;
  add(t, buf, n);
  return 1;
}

/* The lines of /proc/self/status that go into the context (protocol.ts `STATUS_FIELDS`). */
static const char *const status_fields[] = {"Uid:",    "Gid:",    "Groups:", "NoNewPrivs:", "Seccomp:",          "CapInh:",
                                            "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:",     "Cpus_allowed_list:"};

/*
 * What a run inherits from the process that starts it, as protocol.ts `contextOf` says it, byte for byte: namespaces,
 * root, limits (the soft limit of open files blanked: Node raises it as it starts), the status lines above, cgroup,
 * nice. 0 when any cannot be read.
 */
static int context(Text *t) {
  static const char *const namespaces[] = {"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"};
  char link[256], path[64];
  for (size_t i = 0; i < sizeof namespaces / sizeof *namespaces; i++) {
    snprintf(path, sizeof path, "/proc/self/ns/%s", namespaces[i]);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return 0;
    link[n] = 0;
    adds(t, link);
    adds(t, "\n");
  }
  struct stat root;
  if (stat("/proc/self/root", &root) != 0) return 0;
  char line[64];
  snprintf(line, sizeof line, "%llu:%llu\n", (unsigned long long)root.st_dev, (unsigned long long)root.st_ino);
  adds(t, line);
  size_t at = t->n;
  if (!add_file(t, "/proc/self/limits")) return 0;
  for (char *p = t->p + at; p < t->p + t->n;) {
    char *end = memchr(p, '\n', (size_t)(t->p + t->n - p));
    size_t len = end == NULL ? (size_t)(t->p + t->n - p) : (size_t)(end - p);
    if (len >= 46 && strncmp(p, "Max open files ", 15) == 0) memset(p + 26, ' ', 20);
    p += len + 1;
  }
  adds(t, "\n");
  Text status = {0};
  if (!add_file(&status, "/proc/self/status")) return 0;
  for (char *p = status.p; p < status.p + status.n;) {
    char *end = memchr(p, '\n', (size_t)(status.p + status.n - p));
    size_t len = end == NULL ? (size_t)(status.p + status.n - p) : (size_t)(end - p);
    for (size_t i = 0; i < sizeof status_fields / sizeof *status_fields; i++) {
      if (strncmp(p, status_fields[i], strlen(status_fields[i])) == 0) {
        add(t, p, len);
        adds(t, "\n");
        break;
      }
    }
    p += len + 1;
  }
  free(status.p);
  if (!add_file(t, "/proc/self/cgroup")) return 0;
  adds(t, "\n");
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, 0);
  if (errno != 0) return 0;
  snprintf(line, sizeof line, "%d", nice);
  adds(t, line);
  return 1;
}

/* ------------------------------------------------------------------------------------------------------------- */
/* Where things are                                                                                               */

static char here[PATH_MAX]; /* the directory of this program: dist/ */
static char node[PATH_MAX]; /* Node, found on PATH as a shell finds it, its real path (Node's `process.execPath`) */
static struct sigaction pipe_given; /* SIGPIPE as this program was given it: what Node gets back */

/* The build's id (dist/build-id: 64 hex digits and a newline), or 0. */
static int build_id(Text *t) {
  char file[PATH_MAX + 16];
  snprintf(file, sizeof file, "%s/build-id", here);
  Text id = {0};
  int ok = add_file(&id, file) && (id.n == 64 || (id.n == 65 && id.p[64] == '\n'));
  for (size_t i = 0; ok && i < 64; i++) ok = (id.p[i] >= '0' && id.p[i] <= '9') || (id.p[i] >= 'a' && id.p[i] <= 'f');
  if (ok) add(t, id.p, 64);
  free(id.p);
  return ok;
}

static int find_node(void) {
  const char *path = getenv("PATH");
  if (path == NULL || *path == 0) path = "/usr/local/bin:/usr/bin:/bin";
  char candidate[PATH_MAX];
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    size_t n = end == NULL ? strlen(p) : (size_t)(end - p);
    // An empty entry is the working directory, as a shell takes it.
    int len = n == 0 ? snprintf(candidate, sizeof candidate, "./node")
                     : snprintf(candidate, sizeof candidate, "%.*s/node", (int)n, p);
    struct stat st;
    if (len > 0 && (size_t)len < sizeof candidate && access(candidate, X_OK) == 0 && stat(candidate, &st) == 0 &&
        S_ISREG(st.st_mode) && realpath(candidate, node) != NULL) {
      return 1;
    }
    if (end == NULL) return 0;
    p = end;
  }
}

/* Runs `node dist/cli.cjs <args>`: what `kiln` is without a standby. */
static void run_in_node(int argc, char **argv) {
  // Ignored signals stay ignored across exec: Node gets SIGPIPE as this program was given it.
  sigaction(SIGPIPE, &pipe_given, NULL);
  char cli[PATH_MAX + 16];
  snprintf(cli, sizeof cli, "%s/cli.cjs", here);
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (args == NULL) exit(70);
  args[0] = "node";
  args[1] = cli;
  for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
  execv(node, args);
  fprintf(stderr, "kiln: cannot run %s: %s\n", node, strerror(errno));
  exit(127);
}

static int enabled(void) {
  const char *off = getenv("KILN_STANDBY"), *ci = getenv("CI"), *xdg = getenv("XDG_RUNTIME_DIR");
  const char *training = getenv("KILN_WRITE_CODE_CACHE");
  return (off == NULL || strcmp(off, "off") != 0) && (ci == NULL || *ci == 0 || strcmp(ci, "false") == 0) &&
         xdg != NULL && xdg[0] == '/' && (training == NULL || strcmp(training, "1") != 0);
}

/* This user's own, and writable by nobody else: where the Node client looks first (`PrivateDir.socketDirectory`). */
static int private_dir(const char *dir) {
  struct stat st;
  return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 022) == 0;
}

/* ------------------------------------------------------------------------------------------------------------- */
/* Asking the standby                                                                                             */

static int conn = -1;
static const int SIGNALS[] = {SIGINT, SIGTERM, SIGHUP};
static void pass_on(int sig) {
  for (unsigned char i = 0; i < sizeof SIGNALS / sizeof *SIGNALS; i++) {
    if (SIGNALS[i] != sig) continue;
    unsigned char byte = (unsigned char)(i + 1);
    int saved = errno;
    if (write(conn, &byte, 1) < 0) { /* The standby is gone: its end is what the client reports. */ }
    errno = saved;
  }
}

/* What `fd` is, as `client.ts` says it; 0 for a terminal without a width, which Node's client sends as a width of 0
 * and a standby declines (the run is then Node's, and sees a terminal). */
static int add_output(Text *t, int fd) {
  if (!isatty(fd)) {
    adds(t, "{\"tty\":false}");
    return 1;
  }
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return 0;
  char s[64];
  snprintf(s, sizeof s, "{\"tty\":true,\"columns\":%u}", ws.ws_col);
  adds(t, s);
  return 1;
}

/* Whether the entry `*e` (its name `n` bytes long, `=` included) is its name's first in the environment: Node's
 * `process.env` takes the first of duplicates, where a JSON object's last would win. */
static int first_of_its_name(char **e, size_t n) {
  for (char **before = environ; before != e; before++) {
    if (strncmp(*before, *e, n) == 0) return 0;
  }
  return 1;
}

/* The request (protocol.ts `Request`), one line; else why it cannot be sent. */
static const char *request_of(Text *t, int argc, char **argv) {
  static const char *not_utf8 = "text that is not UTF-8";
  adds(t, "{\"v\":1,\"argv\":[");
  for (int i = 1; i < argc; i++) {
    if (i > 1) adds(t, ",");
    if (!add_json(t, argv[i])) return not_utf8;
  }
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == NULL) return "no working directory";
  adds(t, "],\"cwd\":");
  if (!add_json(t, cwd)) return not_utf8;
  adds(t, ",\"env\":{");
  int first = 1;
  for (char **e = environ; *e != NULL; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL || eq == *e || !first_of_its_name(e, (size_t)(eq - *e) + 1)) continue;
    char *name = strndup(*e, (size_t)(eq - *e));
    if (name == NULL) return "out of memory";
    // What the loader deletes from its own environment before a run, and sets itself (where kiln is: this one's).
    if (strcmp(name, "KILN_STANDBY_SERVE") == 0 || strcmp(name, "KILN_WRITE_CODE_CACHE") == 0 ||
        strcmp(name, "KILN_CLI") == 0) {
      free(name);
      continue;
    }
    if (!first) adds(t, ",");
    first = 0;
    int ok = add_json(t, name) && (adds(t, ":"), add_json(t, eq + 1));
    free(name);
    if (!ok) return not_utf8;
  }
  adds(t, first ? "" : ",");
  adds(t, "\"KILN_CLI\":");
  char cli[PATH_MAX + 16];
  snprintf(cli, sizeof cli, "%s/cli.cjs", here);
  if (!add_json(t, cli)) return not_utf8;
  mode_t mask = umask(0);
  umask(mask);
  char tail[32];
  snprintf(tail, sizeof tail, "},\"umask\":%u,\"stdout\":", (unsigned)mask);
  adds(t, tail);
  if (!add_output(t, 1)) return "a terminal without a width";
  adds(t, ",\"stderr\":");
  if (!add_output(t, 2)) return "a terminal without a width";
  adds(t, "}\n");
  return NULL;
}

static int read_fully(int fd, unsigned char *into, size_t n) {
  for (size_t at = 0; at < n;) {
    ssize_t r = read(fd, into + at, n - at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    at += (size_t)r;
  }
  return 1;
}

static int write_fully(int fd, const unsigned char *from, size_t n) {
  for (size_t at = 0; at < n;) {
    ssize_t w = write(fd, from + at, n - at);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A descriptor another process made non-blocking (a terminal, a pipe it shares): wait until it takes more.
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      if (poll(&p, 1, -1) < 0 && errno != EINTR) return 0;
      continue;
    }
    if (w <= 0) return 0;
    at += (size_t)w;
  }
  return 1;
}

static void lost(const char *why) {
  fprintf(stderr, "kiln: the standby engine that took this run on %s\n", why);
  exit(1);
}

/* After `A`: the run's output, written here as the run wrote it, then its exit code. Never returns. */
static void relay(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = pass_on;
  sa.sa_flags = SA_RESTART;
  // All three, even one this program was started with ignored (`nohup`, a script's `&`): Node sets every signal back
  // to its default as it starts, so a kiln without a standby ends on them, and a run through one must too.
  for (size_t i = 0; i < sizeof SIGNALS / sizeof *SIGNALS; i++) sigaction(SIGNALS[i], &sa, NULL);
  unsigned char *body = NULL;
  for (;;) {
    unsigned char head[5];
    if (!read_fully(conn, head, 5)) lost("ended before the run did");
    uint32_t n = (uint32_t)head[1] << 24 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 8 | head[4];
    if (head[0] == EXITED) exit((int)(int32_t)n);
    if (head[0] != STDOUT_FRAME && head[0] != STDERR_FRAME) lost("sent a frame it does not know");
    if (n > MAX_FRAME_BYTES) {
      char why[80];
      snprintf(why, sizeof why, "sent a frame of %u bytes, more than any it sends", n);
      lost(why);
    }
    if (body == NULL && (body = malloc(MAX_FRAME_BYTES)) == NULL) exit(70);
    if (!read_fully(conn, body, n)) lost("ended before the run did");
    // A reader that went away (`kiln run | head`) ends the client, as it ends Node's (EPIPE), and the standby ends
    // the run, as a shell pipeline's writer ends: the connection closes.
    if (!write_fully(head[0] == STDOUT_FRAME ? 1 : 2, body, n) && errno == EPIPE) exit(1);
  }
}

/* Hands the run to the standby of `key`; returns (to run in Node) unless it was taken on. */
static void ask_standby(int argc, char **argv, const char *socket_path) {
  Text request = {0};
  const char *unsendable = request_of(&request, argc, argv);
  if (unsendable != NULL) {
    debug(unsendable, "");
    return;
  }
  conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  strcpy(addr.sun_path, socket_path);
  if (conn < 0 || connect(conn, (struct sockaddr *)&addr, sizeof addr) != 0) {
    debug("cannot reach it: connect ", errno == ECONNREFUSED ? "ECONNREFUSED" : errno == ENOENT ? "ENOENT" : strerror(errno));
    return;
  }
  struct ucred peer;
  socklen_t len = sizeof peer;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != geteuid()) {
    debug("its socket is not this user's", "");
    return;
  }
  if (!write_fully(conn, (unsigned char *)request.p, request.n)) {
    debug("it closed the connection", "");
    return;
  }
  unsigned char answer;
  if (!read_fully(conn, &answer, 1)) {
    debug("it closed the connection", "");
    return;
  }
  if (answer == ACCEPTED) {
    debug("taken on", "");
    relay();
  }
  if (answer != DECLINED) {
    debug("an answer it does not know", "");
    return;
  }
  char reason[MAX_REASON_BYTES + 1];
  size_t n = 0;
  int ended = 0;
  while (n < MAX_REASON_BYTES && read_fully(conn, (unsigned char *)&reason[n], 1)) {
    if (reason[n] == '\n') {
      ended = 1;
      break;
    }
    n++;
  }
  if (!ended) {
    debug("an answer it does not know", "");
    return;
  }
  reason[n] = 0;
  debug("declined: ", reason);
}

int main(int argc, char **argv) {
  clock_gettime(CLOCK_MONOTONIC, &started);
  // A descriptor 0-2 closed at start would be taken by the socket, and the run's output sent back into it: Node
  // opens /dev/null in their place, and so does this.
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (opened != fd) return 127;
    }
  }
  const char *dbg = getenv("KILN_STANDBY_DEBUG");
  debug_on = dbg != NULL && strcmp(dbg, "1") == 0;
  // A write to a reader that went away is an error here (EPIPE), not a death: the client says so to the standby by
  // closing the connection.
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &pipe_given);
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || (size_t)n >= sizeof self - 1) {
    fputs("kiln: cannot tell where this program is (/proc/self/exe)\n", stderr);
    return 127;
  }
  self[n] = 0;
  strcpy(here, self);
  *strrchr(here, '/') = 0;
  char cli[PATH_MAX + 16];
  snprintf(cli, sizeof cli, "%s/cli.cjs", here);
  if (access(cli, R_OK) != 0) {
    // Copied out of kiln's dist/ rather than linked to: the program it runs is not beside it.
    fprintf(stderr, "kiln: %s is missing: run kiln from its dist/ (or a symlink to it), not a copy\n", cli);
    return 127;
  }
  if (!find_node()) {
    fputs("kiln: node is not on PATH (kiln runs on Node 20 or later)\n", stderr);
    return 127;
  }
  if (argc < 2 || strcmp(argv[1], "run") != 0 || !enabled()) run_in_node(argc, argv);

  // The key of the standby this run may use, as `protocol.ts` makes it for `node dist/cli.cjs` (no Node options).
  char bundle[PATH_MAX + 16];
  snprintf(bundle, sizeof bundle, "%s/kiln.cjs", here);
  const char *options = getenv("NODE_OPTIONS");
  Text bundle_id = {0}, node_id = {0}, scratch = {0};
  if (!identity(&bundle_id, bundle) || !identity(&node_id, node)) run_in_node(argc, argv);
  if (!add_json(&scratch, bundle_id.p) || !add_json(&scratch, node_id.p) ||
      !add_json(&scratch, options == NULL ? "" : options)) {
    run_in_node(argc, argv);
  }
  Text build = {0}, ctx = {0};
  if (!build_id(&build) || !context(&ctx)) run_in_node(argc, argv);
  NameHash h = {0x811c9dc5u, 0x9e3779b9u};
  hash_text(&h, bundle_id.p);
  hash_unit(&h, 0);
  hash_text(&h, node_id.p);
  hash_unit(&h, 0);
  hash_text(&h, options == NULL ? "" : options);
  hash_unit(&h, 0);
  hash_text(&h, build.p);
  hash_unit(&h, 0);
  hash_text(&h, ctx.p);

  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (strlen(xdg) + 5 + 40 > MAX_SOCKET_PATH) run_in_node(argc, argv);
  char dir[MAX_SOCKET_PATH + 1], socket_path[MAX_SOCKET_PATH + 64];
  snprintf(dir, sizeof dir, "%s/kiln", xdg);
  snprintf(socket_path, sizeof socket_path, "%s/standby-%08x%08x.sock", dir, h.a, h.b);
  struct stat st;
  if (!private_dir(xdg) || !private_dir(dir) || lstat(socket_path, &st) != 0 ||
      !S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
    debug("none waiting", "");
    run_in_node(argc, argv);
  }
  ask_standby(argc, argv, socket_path);
  run_in_node(argc, argv);
}
