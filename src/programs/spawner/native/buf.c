/* Growing buffers, JSON text and errno names for the native spawner (spawner.c). */
#include "spawner.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------------------- */
/* Growing byte buffers                                                                                           */

void buf_reserve(Buf *b, size_t more) {
  if (b->n + more <= b->cap) return;
  size_t cap = b->cap == 0 ? 256 : b->cap;
  while (cap < b->n + more) cap *= 2;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    fputs("kiln-spawner: out of memory\n", stderr);
    _exit(70);
  }
  b->p = p;
  b->cap = cap;
}

void buf_add(Buf *b, const char *s, size_t n) {
  // Nothing to add (an empty key, say) may find no buffer yet: memcpy to NULL is undefined even for 0 bytes.
  if (n == 0) return;
  buf_reserve(b, n);
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

void buf_str(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

void buf_num(Buf *b, long long v) {
  char t[32];
  int n = snprintf(t, sizeof t, "%lld", v);
  buf_add(b, t, (size_t)n);
}

/** `s` as a JSON string literal. */
void buf_json(Buf *b, const char *s) {
  buf_add(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c != 0; c++) {
    if (*c == '"' || *c == '\\') {
      char e[2] = {'\\', (char)*c};
      buf_add(b, e, 2);
    } else if (*c < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", *c);
      buf_add(b, e, 6);
    } else {
      buf_add(b, (const char *)c, 1);
    }
  }
  buf_add(b, "\"", 1);
}

/* ------------------------------------------------------------------------------------------------------------- */
/* Names of errnos and signals, as Node gives them                                                                */

const char *errno_name(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case ENXIO: return "ENXIO";
    case E2BIG: return "E2BIG";
    case ENOEXEC: return "ENOEXEC";
    case EBADF: return "EBADF";
    case ECHILD: return "ECHILD";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case ENODEV: return "ENODEV";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case ETXTBSY: return "ETXTBSY";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case EROFS: return "EROFS";
    case EMLINK: return "EMLINK";
    case EPIPE: return "EPIPE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    case EDQUOT: return "EDQUOT";
    case ELIBBAD: return "ELIBBAD";
    default: return "EIO";
  }
}
