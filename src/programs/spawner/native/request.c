/* The native spawner's reader of requests: the JSON objects `../protocol.ts` encodes, one a line. */
#include "spawner.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------------------- */
/* Requests: a JSON reader for the objects `protocol.ts` encodes                                                  */

typedef struct {
  const char *p, *end;
} Json;

static void strings_add(Strings *s, char *v) {
  if (s->n + 1 >= s->cap) {
    s->cap = s->cap == 0 ? 8 : s->cap * 2;
    s->items = realloc(s->items, s->cap * sizeof *s->items);
    if (s->items == NULL) _exit(70);
  }
  s->items[s->n++] = v;
  s->items[s->n] = NULL;
}

static void strings_free(Strings *s) {
  for (size_t i = 0; i < s->n; i++) free(s->items[i]);
  free(s->items);
  *s = (Strings){0};
}

void request_free(Request *r) {
  strings_free(&r->argv);
  strings_free(&r->env);
  strings_free(&r->paths);
  strings_free(&r->namespace);
  free(r->cwd);
  free(r->out);
  free(r->err);
  free(r->log);
}

static void skip_ws(Json *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n')) j->p++;
}

static bool eat(Json *j, char c) {
  skip_ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return true;
  }
  return false;
}

static void utf8(Buf *b, uint32_t c) {
  char t[4];
  if (c < 0x80) {
    t[0] = (char)c;
    buf_add(b, t, 1);
  } else if (c < 0x800) {
    t[0] = (char)(0xc0 | (c >> 6));
    t[1] = (char)(0x80 | (c & 0x3f));
    buf_add(b, t, 2);
  } else if (c < 0x10000) {
    t[0] = (char)(0xe0 | (c >> 12));
    t[1] = (char)(0x80 | ((c >> 6) & 0x3f));
    t[2] = (char)(0x80 | (c & 0x3f));
    buf_add(b, t, 3);
  } else {
    t[0] = (char)(0xf0 | (c >> 18));
    t[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    t[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    t[3] = (char)(0x80 | (c & 0x3f));
    buf_add(b, t, 4);
  }
}

static bool hex4(Json *j, uint32_t *out) {
  if (j->end - j->p < 4) return false;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = *j->p++;
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return false;
  }
  *out = v;
  return true;
}

/**
 * A string, decoded into a new NUL-terminated one; NULL if it is not one, or holds a NUL (no path or arg can). A raw
 * control character is not JSON, and a raw NUL would cut the string short: a path would name another file.
 */
static char *read_string(Json *j) {
  if (!eat(j, '"')) return NULL;
  Buf b = {0};
  while (j->p < j->end && *j->p != '"') {
    char c = *j->p++;
    if ((unsigned char)c < 0x20) goto bad;
    if (c != '\\') {
      buf_add(&b, &c, 1);
      continue;
    }
    if (j->p >= j->end) break;
    char e = *j->p++;
    uint32_t u, lo;
    switch (e) {
      case '"': case '\\': case '/': buf_add(&b, &e, 1); break;
      case 'b': buf_add(&b, "\b", 1); break;
      case 'f': buf_add(&b, "\f", 1); break;
      case 'n': buf_add(&b, "\n", 1); break;
      case 'r': buf_add(&b, "\r", 1); break;
      case 't': buf_add(&b, "\t", 1); break;
      case 'u':
        if (!hex4(j, &u) || u == 0) goto bad;
        if (u >= 0xd800 && u < 0xdc00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
          const char *at = j->p;
          j->p += 2;
          if (hex4(j, &lo) && lo >= 0xdc00 && lo < 0xe000) u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
          else j->p = at;
        }
        utf8(&b, u);
        break;
      default: goto bad;
    }
  }
  if (!eat(j, '"')) goto bad;
  buf_add(&b, "", 1);
  return b.p;
bad:
  free(b.p);
  return NULL;
}

static bool read_int(Json *j, long long *out) {
  skip_ws(j);
  char *stop;
  errno = 0;
  long long v = strtoll(j->p, &stop, 10);
  if (stop == j->p || errno != 0 || stop > j->end) return false;
  if (stop < j->end && (*stop == '.' || *stop == 'e' || *stop == 'E')) return false;
  j->p = stop;
  *out = v;
  return true;
}

/** Skips a value of a field this program does not know. */
static bool skip_value(Json *j, int depth) {
  skip_ws(j);
  if (j->p >= j->end || depth > 32) return false;
  char c = *j->p;
  if (c == '"') {
    char *s = read_string(j);
    free(s);
    return s != NULL;
  }
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    if (eat(j, close)) return true;
    do {
      if (c == '{') {
        char *k = read_string(j);
        free(k);
        if (k == NULL || !eat(j, ':')) return false;
      }
      if (!skip_value(j, depth + 1)) return false;
    } while (eat(j, ','));
    return eat(j, close);
  }
  while (j->p < j->end && *j->p != ',' && *j->p != '}' && *j->p != ']') j->p++;
  return true;
}

static bool read_strings(Json *j, Strings *out) {
  if (!eat(j, '[')) return false;
  if (eat(j, ']')) return true;
  do {
    char *s = read_string(j);
    if (s == NULL) return false;
    strings_add(out, s);
  } while (eat(j, ','));
  return eat(j, ']');
}

/** An environment object, as `NAME=value` strings. */
static bool read_env(Json *j, Strings *out) {
  if (!eat(j, '{')) return false;
  if (eat(j, '}')) return true;
  do {
    char *k = read_string(j);
    if (k == NULL || !eat(j, ':')) {
      free(k);
      return false;
    }
    char *v = read_string(j);
    if (v == NULL) {
      free(k);
      return false;
    }
    Buf b = {0};
    buf_str(&b, k);
    buf_add(&b, "=", 1);
    buf_str(&b, v);
    buf_add(&b, "", 1);
    free(k);
    free(v);
    strings_add(out, b.p);
  } while (eat(j, ','));
  return eat(j, '}');
}

/**
 * Whether a field this program reads is there a second time. JSON leaves a repeated name's meaning open (the Node
 * spawner's parser keeps the last value; a list here would grow), and the engine never repeats one: refused.
 */
static bool repeated(const Request *r, const char *key) {
  if (strcmp(key, "kind") == 0) return r->kind[0] != 0;
  if (strcmp(key, "id") == 0) return r->has_id;
  if (strcmp(key, "argv") == 0) return r->has_argv;
  if (strcmp(key, "paths") == 0) return r->has_paths;
  if (strcmp(key, "namespace") == 0) return r->has_namespace;
  if (strcmp(key, "env") == 0) return r->has_env;
  if (strcmp(key, "cwd") == 0) return r->has_cwd;
  if (strcmp(key, "stdout") == 0) return r->has_stdout;
  if (strcmp(key, "stderr") == 0) return r->has_stderr;
  if (strcmp(key, "log") == 0) return r->has_log;
  return false;
}

/** Reads one request line into `r`; returns the reason it is malformed, or NULL. */
const char *parse(const char *line, size_t n, Request *r) {
  Json j = {line, line + n};
  if (!eat(&j, '{')) return "not an object";
  if (eat(&j, '}')) return "no such kind undefined";
  do {
    char *key = read_string(&j);
    if (key == NULL || !eat(&j, ':')) {
      free(key);
      return "not JSON";
    }
    bool ok = true;
    char *s;
    if (repeated(r, key)) {
      // Single-threaded: the reason is read before the next request is.
      static char again[96];
      snprintf(again, sizeof again, "a repeated \"%.40s\"", key);
      free(key);
      return again;
    }
    if (strcmp(key, "kind") == 0) {
      s = read_string(&j);
      ok = s != NULL && strlen(s) < sizeof r->kind;
      if (ok) strcpy(r->kind, s);
      free(s);
    } else if (strcmp(key, "id") == 0) {
      ok = r->has_id = read_int(&j, &r->id) && r->id >= 0;
    } else if (strcmp(key, "argv") == 0) {
      ok = r->has_argv = read_strings(&j, &r->argv) && r->argv.n > 0;
    } else if (strcmp(key, "paths") == 0) {
      ok = r->has_paths = read_strings(&j, &r->paths);
    } else if (strcmp(key, "namespace") == 0) {
      ok = r->has_namespace = read_strings(&j, &r->namespace);
    } else if (strcmp(key, "env") == 0) {
      ok = r->has_env = read_env(&j, &r->env);
    } else if (strcmp(key, "cwd") == 0) {
      ok = r->has_cwd = (r->cwd = read_string(&j)) != NULL;
    } else if (strcmp(key, "stdout") == 0) {
      ok = r->has_stdout = (r->out = read_string(&j)) != NULL;
    } else if (strcmp(key, "stderr") == 0) {
      ok = r->has_stderr = (r->err = read_string(&j)) != NULL;
    } else if (strcmp(key, "log") == 0) {
      ok = r->has_log = (r->log = read_string(&j)) != NULL;
    } else {
      ok = skip_value(&j, 0);
    }
    if (!ok) {
      // Single-threaded: the reason is read before the next request is.
      static char why[96];
      snprintf(why, sizeof why, "a bad \"%.40s\" (not of its type, or holding a NUL)", key);
      free(key);
      return why;
    }
    free(key);
  } while (eat(&j, ','));
  if (!eat(&j, '}')) return "not JSON";
  skip_ws(&j);
  if (j.p != j.end) return "not JSON";
  if (strcmp(r->kind, "spawn") == 0) {
    if (r->has_id && r->has_argv && r->has_cwd && r->has_env && r->has_stdout && r->has_stderr) return NULL;
  } else if (strcmp(r->kind, "remove") == 0) {
    if (r->has_id && r->has_paths) return NULL;
  } else if (strcmp(r->kind, "arm") == 0) {
    if (r->has_argv && r->has_log) return NULL;
  } else if (strcmp(r->kind, "disarm") == 0) {
    return NULL;
  } else {
    return "no such kind";
  }
  return "a missing field";
}
