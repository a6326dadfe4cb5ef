/*
 * What the native spawner's files share: growing buffers and JSON text (buf.c), requests as read from the engine
 * (request.c), and the removal of trees (remove.c). See spawner.c.
 */
#ifndef KILN_SPAWNER_H
#define KILN_SPAWNER_H
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
  char *p;
  size_t n, cap;
} Buf;

void buf_reserve(Buf *b, size_t more);
void buf_add(Buf *b, const char *s, size_t n);
void buf_str(Buf *b, const char *s);
void buf_num(Buf *b, long long v);
/** `s` as a JSON string literal. */
void buf_json(Buf *b, const char *s);
/** The errno's name, as Node's `code` gives it. */
const char *errno_name(int e);

typedef struct {
  char **items;
  size_t n, cap;
} Strings;

typedef struct {
  char kind[16];
  long long id;
  bool has_id, has_argv, has_cwd, has_env, has_stdout, has_stderr, has_paths, has_log, has_namespace;
  Strings argv, env, paths, namespace;
  char *cwd, *out, *err, *log;
} Request;

/** Reads one request line into `r`; returns why it is malformed, or NULL. */
const char *parse(const char *line, size_t n, Request *r);
void request_free(Request *r);

typedef struct {
  int code;
  const char *op;
  Buf path;
} Failure;

/** The first mount point at or under `dir` (unescaped from /proc/self/mountinfo), into `out`; false if none. */
bool mount_under(const char *dir, Buf *out);
/** Removes `target` (file, symlink or tree), read-only directories included; an absent target is not an error. */
bool remove_tree(const char *target, Failure *f);

/**
 * In the forked child: enters the mount namespace `namespace` describes (see ns.c), and points `cwd` at the directory
 * to start in there when it names one; 0, or the errno.
 */
int enter_namespace(const Strings *namespace, const char **cwd);

/** The strict view a namespace asks for (see ns.c), pointing into its strings. */
typedef struct {
  bool on;
  /** The host's network, rather than a namespace of its own with only a loopback. */
  bool network;
  bool user;
  /** The spawner's ids, set before the clone: the init maps them in its user namespace. */
  uid_t uid;
  gid_t gid;
  /** The sandbox's host path, and where the process sees it. */
  const char *sandbox, *at;
  /** Host paths shown at their own paths: read-only, or read-write where `hosts_rw` says (named caches). */
  const char **hosts;
  bool *hosts_rw;
  size_t hosts_n;
} View;

/** The view `namespace` asks for (`on` false: none); false if it is malformed. */
bool view_of(const Strings *namespace, View *v);
/** The namespaces clone(2) makes for the view's init: PID, mount, IPC, network unless `network`, user for `user`. */
unsigned long view_clone_flags(const View *v);
/**
 * In the view's init, just cloned into its namespaces: the mounts of `namespace`, the new root (root.c), the
 * loopback (net.c), and for `user` the user namespace that maps the user back; `cwd` as enter_namespace. 0, or the
 * errno.
 */
int enter_view(const Strings *namespace, const View *v, const char **cwd);
/** The new root, pivoted into (root.c); 0, or the errno. */
int make_root(const View *v);
/** Brings up the loopback of this network namespace (net.c); 0, or the errno. */
int loopback_up(void);
/** Whether this network namespace's only IPv4 address, if any, is 127.0.0.1 (net.c). */
bool only_loopback_address(void);

/**
 * The network namespaces kept for views (netpool.c). `netpool_enter` moves this process into one no running process
 * holds, made if none is free, and returns its descriptor for `netpool_give` (-1: none, this process stays where it
 * is, and the view makes its own); `netpool_leave` moves it back. `netpool_give` takes one back once every process in
 * it is dead. `netpool_close_in_child` closes the pool's descriptors in a child.
 */
int netpool_enter(void);
void netpool_leave(void);
void netpool_give(int fd);
void netpool_close_in_child(void);
/**
 * As another user (netpool.c): whether a view's starter can join the pool's user namespace, and then in `*fd` a
 * pooled network namespace for it (-1: it makes one), which the caller gives back as `netpool_give`'s.
 */
bool netpool_take(int *fd);
/**
 * In a view's starter, as another user: joins the pool's user namespace, then the network namespace `fd` if nothing
 * of an earlier process is left in it, else one made here, whose descriptor is put in `*fresh`. 0, or the errno.
 */
int netpool_join(int fd, int *fresh);
/** In a user namespace just made: `inside` is `outside` of the parent's (one id each), with no groups to set (ns.c). */
int map_ids(unsigned inside_uid, unsigned outside_uid, unsigned inside_gid, unsigned outside_gid);
/** The mount at `path` made read-only, keeping the flags a user namespace locks; 0, or the errno. */
int remount_read_only(const char *path);

/**
 * What a process's reaper (reaper.c) and the process itself tell the spawner as it starts. `REPORT_SELF` is the
 * process saying it runs, in a PID namespace of its own: its pid as the spawner sees it is the message's sender's,
 * which the kernel translates (SCM_CREDENTIALS), not a number it could write. A view's starter as another user
 * (netpool.c) says `REPORT_REAPER`, the reaper it cloned as the spawner's child, and `REPORT_NETNS` with the network
 * namespace it made, for the pool.
 */
typedef struct {
  enum { REPORT_PID, REPORT_ERRNO, REPORT_NAMESPACE_ERRNO, REPORT_SELF, REPORT_REAPER, REPORT_NETNS } kind;
  int value;
} Report;

/**
 * execvp with the child's own PATH, as Node (libuv) does: a name without a slash is looked up in `env`'s PATH, or
 * /usr/bin:/bin without one. Returns the errno that ends the search (exec.c).
 */
int exec_in(char *const *argv, char *const *env);
/** caps.c: in the strict view, before exec, every capability but those a build needs for its own files goes. */
int drop_capabilities(void);
/**
 * The next report from a reaper or its process; false once every writer is gone. `*sender` is the pid (as the
 * spawner sees it) of the process that wrote it, from the credentials the kernel attaches, and `*passed` the
 * descriptor it passed (REPORT_NETNS), else -1 (exec.c).
 */
bool read_report(int fd, Report *m, pid_t *sender, int *passed);
/** Sends `m` with the descriptor `passed` (SCM_RIGHTS); 0, or the errno (exec.c). */
int send_report_fd(int fd, Report m, int passed);

/** Makes this process a child subreaper; 0, or the errno. */
int subreaper(void);
/**
 * In a reaper whose child `process` runs: waits for it, then kills every child left, and exits as it did. With
 * `status_fd` (a view's init, PID 1 of its namespace, which cannot die of a signal it sends itself), it writes the
 * process's wait status there and exits 0 instead.
 */
_Noreturn void reap_for(pid_t process, int status_fd);

#endif
