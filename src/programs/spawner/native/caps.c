/*
 * The capabilities a process keeps in the strict view (caps.c). As root, and in the user namespace an unprivileged
 * kiln makes, a process would start with every capability: CAP_SYS_ADMIN remounts its read-only view writable (the
 * workspace's shared trees, the host's /usr as root), CAP_MKNOD and CAP_SYS_RAWIO reach the disk beneath it,
 * CAP_DAC_READ_SEARCH opens any file by handle. It keeps what a build tool running as root needs for files it owns
 * (Docker's default set, less CAP_MKNOD, since the view's /dev is a few character devices): the bounding set loses the
 * rest too, so a setuid program cannot win them back, and the ambient set is cleared.
 */
#include "spawner.h"
#include <errno.h>
#include <linux/capability.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const int KEPT[] = {
  CAP_CHOWN,        CAP_DAC_OVERRIDE, CAP_FOWNER,           CAP_FSETID,  CAP_KILL,
  CAP_SETGID,       CAP_SETUID,       CAP_SETPCAP,          CAP_NET_BIND_SERVICE,
  CAP_NET_RAW,      CAP_SYS_CHROOT,   CAP_SETFCAP,          CAP_AUDIT_WRITE,
};

/** Drops every capability but {@link KEPT} from the bounding, ambient, inheritable, permitted and effective sets. */
int drop_capabilities(void) {
  uint64_t keep = 0;
  for (size_t i = 0; i < sizeof KEPT / sizeof KEPT[0]; i++) keep |= 1ULL << KEPT[i];
  // The bounding set first: dropping from it needs CAP_SETPCAP, which the permitted set is about to be cut to.
  for (int cap = 0; cap < 64; cap++) {
    if ((keep >> cap) & 1) continue;
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) break; // EINVAL: past the kernel's last capability
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return errno;
  }
  // Kernels before 4.3 have no ambient set: nothing to clear there.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return errno;
  for (int i = 0; i < 2; i++) {
    uint32_t kept = (uint32_t)(keep >> (32 * i));
    data[i].effective &= kept;
    data[i].permitted &= kept;
    data[i].inheritable &= kept;
  }
  if (syscall(SYS_capset, &header, data) != 0) return errno;
  return 0;
}
