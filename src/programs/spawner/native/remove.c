/* The native spawner's removal of trees, as `src/os/RemoveTree.ts` and `src/os/mounts/Mounts.ts` do it. */
#include "spawner.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------------------- */
/* Removing trees: `src/os/RemoveTree.ts` and `src/os/mounts/Mounts.ts`                                             */


/** The first mount point at or under `dir` (unescaped from /proc/self/mountinfo), into `out`; false if none. */
bool mount_under(const char *dir, Buf *out) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL) return false;
  char *line = NULL;
  size_t cap = 0;
  size_t n = strlen(dir);
  bool found = false;
  while (!found && getline(&line, &cap, f) > 0) {
    char *field = line;
    for (int i = 0; i < 4 && field != NULL; i++) {
      field = strchr(field, ' ');
      if (field != NULL) field++;
    }
    if (field == NULL) continue;
    out->n = 0;
    for (char *c = field; *c != ' ' && *c != '\n' && *c != 0; c++) {
      if (c[0] == '\\' && c[1] >= '0' && c[1] <= '7' && c[2] >= '0' && c[2] <= '7' && c[3] >= '0' && c[3] <= '7') {
        char v = (char)(((c[1] - '0') << 6) | ((c[2] - '0') << 3) | (c[3] - '0'));
        buf_add(out, &v, 1);
        c += 3;
      } else {
        buf_add(out, c, 1);
      }
    }
    buf_add(out, "", 1);
    found = strncmp(out->p, dir, n) == 0 && (out->p[n] == 0 || out->p[n] == '/');
  }
  free(line);
  fclose(f);
  return found;
}

static void make_writable_at(int dirfd, const char *name) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 0700) != 0700) {
    fchmodat(dirfd, name, (st.st_mode & 07777) | 0700, 0);
  }
}

static bool fail(Failure *f, int code, const char *op, const Buf *path) {
  f->code = code;
  f->op = op;
  f->path.n = 0;
  buf_add(&f->path, path->p, path->n);
  buf_add(&f->path, "", 1);
  return false;
}

/**
 * Removes the directory `name` in `parent` (its path so far in `path`); with `careful`, each directory is made
 * writable before it is emptied. One that gained an entry meanwhile is emptied again, a bounded number of times.
 */
static bool remove_dir(int parent, const char *name, Buf *path, bool careful, Failure *f) {
  size_t base = path->n;
  for (int attempt = 1;; attempt++) {
    if (careful) make_writable_at(parent, name);
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? true : fail(f, errno, "scandir", path);
    DIR *d = fdopendir(fd);
    if (d == NULL) {
      close(fd);
      return fail(f, errno, "scandir", path);
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      path->n = base;
      buf_add(path, "/", 1);
      buf_str(path, e->d_name);
      buf_add(path, "", 1);
      path->n--;
      bool dir = e->d_type == DT_DIR;
      struct stat st;
      if (e->d_type == DT_UNKNOWN && fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) dir = S_ISDIR(st.st_mode);
      if (dir) {
        if (!remove_dir(fd, e->d_name, path, careful, f)) {
          closedir(d);
          return false;
        }
      } else if (unlinkat(fd, e->d_name, 0) != 0 && errno != ENOENT) {
        bool ok = fail(f, errno, "unlink", path);
        closedir(d);
        return ok;
      }
    }
    closedir(d);
    path->n = base;
    buf_add(path, "", 1);
    path->n--;
    if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT) return true;
    if (errno != ENOTEMPTY || attempt == 5) return fail(f, errno, "rmdir", path);
  }
}

static bool denied(int e) { return e == EACCES || e == EPERM; }

/** Removes `target` (file, symlink or tree), read-only directories included; an absent target is not an error. */
bool remove_tree(const char *target, Failure *f) {
  Buf path = {0};
  buf_str(&path, target);
  buf_add(&path, "", 1);
  path.n--;
  struct stat st;
  bool ok = true;
  // The directory `target` is in: "/" for "/x", "." for a name without a slash (room for it even when `target` is "").
  size_t length = strlen(target);
  char *parent = malloc(length < 2 ? 2 : length + 1);
  if (parent == NULL) _exit(70);
  strcpy(parent, target);
  char *slash = strrchr(parent, '/');
  if (slash == parent) slash[1] = 0;
  else if (slash != NULL) *slash = 0;
  else strcpy(parent, ".");
  if (lstat(target, &st) != 0) {
    ok = errno == ENOENT ? true : fail(f, errno, "lstat", &path);
  } else if (!S_ISDIR(st.st_mode)) {
    if (unlink(target) != 0) {
      if (!denied(errno)) ok = fail(f, errno, "unlink", &path);
      else {
        make_writable_at(AT_FDCWD, parent);
        if (unlink(target) != 0 && errno != ENOENT) ok = fail(f, errno, "unlink", &path);
      }
    }
  } else if (!remove_dir(AT_FDCWD, target, &path, false, f)) {
    // Most trees are as kiln made them, writable; one a tool left read-only fails, and is removed again, carefully.
    if (!denied(f->code)) ok = false;
    else {
      make_writable_at(AT_FDCWD, parent);
      path.n = strlen(target);
      ok = remove_dir(AT_FDCWD, target, &path, true, f);
    }
  }
  free(parent);
  free(path.p);
  return ok;
}
