/*
 * The network a process in the strict view has (see root.c): a namespace of its own, whose only interface, the
 * loopback, the kernel makes down. Brought up, a process can still serve and reach itself on 127.0.0.1 (a test
 * server, a language server it starts), and nothing else.
 */
#include "spawner.h"
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int e = 0;
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) e = errno;
  if (e == 0 && !(ifr.ifr_flags & IFF_UP)) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) e = errno;
  }
  close(s);
  return e;
}

bool only_loopback_address(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  struct ifreq found[4];
  struct ifconf conf = {.ifc_len = sizeof found, .ifc_req = found};
  bool only = ioctl(s, SIOCGIFCONF, &conf) == 0 && (size_t)conf.ifc_len <= sizeof *found;
  for (size_t i = 0; only && i < (size_t)conf.ifc_len / sizeof *found; i++) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&found[i].ifr_addr;
    only = a->sin_family == AF_INET && a->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
  }
  close(s);
  return only;
}
