/*
 * A process's reaper: the spawner forks one per process it starts, which forks the process itself (spawner.c,
 * `start_child`). It is a child subreaper (PR_SET_CHILD_SUBREAPER), so whatever leaves the process's group and loses
 * its parent (a daemon that called `setsid`, `setsid -f`, a shell's background job under `set -m`) becomes the
 * reaper's child rather than init's. Once the process has exited, the reaper SIGKILLs every child it has, again as
 * each one's own orphans come to it, until it has none; then it exits as the process did, which is what the spawner
 * reports. Its exit is the process's: the engine's timeout, Ctrl-C and the watchdog end the process's group, and the
 * reaper ends the rest.
 *
 * One reaper per process, not the spawner itself as the subreaper: several processes run at once, and an orphan
 * must be ended with the process it came from, not when another process ends.
 */
#include "spawner.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int subreaper(void) { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : errno; }

/** The parent pid in a `/proc/<pid>/stat` line: after the command's closing parenthesis, the state, then it. */
static pid_t parent_in_stat(const char *stat) {
  const char *close = strrchr(stat, ')');
  int ppid;
  return close != NULL && sscanf(close + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : 0;
}

/** SIGKILLs every child of this process: listed by /proc/self/task/<tid>/children, or by /proc/<pid>/stat without it. */
static void kill_children(void) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE *children = fopen(path, "re");
  if (children != NULL) {
    long pid;
    while (fscanf(children, "%ld", &pid) == 1) kill((pid_t)pid, SIGKILL);
    fclose(children);
    return;
  }
  // A kernel without CONFIG_PROC_CHILDREN: every process is looked at.
  DIR *proc = opendir("/proc");
  if (proc == NULL) return;
  pid_t self = getpid();
  for (struct dirent *e; (e = readdir(proc)) != NULL;) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char stat_path[300], stat[512];
    snprintf(stat_path, sizeof stat_path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(stat_path, "re");
    if (f == NULL) continue;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    if (parent_in_stat(stat) == self) kill((pid_t)atoi(e->d_name), SIGKILL);
  }
  closedir(proc);
}

/** Exits as the process did: its code, or its signal (without a core file of this program). */
static _Noreturn void exit_as(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

_Noreturn void reap_for(pid_t process, int status_fd) {
  // SIGCHLD stays blocked (as the spawner has it), and is waited for: nothing runs in a handler.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int status = 0;
  bool exited = false;
  for (;;) {
    for (;;) {
      int st;
      pid_t pid = waitpid(-1, &st, WNOHANG | __WALL);
      if (pid == process) {
        status = st;
        exited = true;
      }
      if (pid > 0 || (pid < 0 && errno == EINTR)) continue;
      // No child left at all: the process has exited (it is one), and nothing it left behind remains.
      if (pid < 0 && status_fd >= 0) {
        ssize_t ignored = write(status_fd, &status, sizeof status);
        (void)ignored;
        _exit(0);
      }
      if (pid < 0) exit_as(status);
      break;
    }
    if (exited) kill_children();
    // Until a child exits; once the process has, also every 10 ms: a child reparented here while the list was read
    // is killed on the next round.
    struct timespec tick = {0, 10 * 1000 * 1000};
    sigtimedwait(&chld, NULL, exited ? &tick : NULL);
  }
}
