/* The store the ranks exchange fresh unique ids through at restore, one per job, from
 * NCCLBIND_SHIM_STORE:
 *   file:DIR              a directory every rank sees (a value is written aside and renamed in)
 *   tcp:HOST:PORT         a line server on localhost (python -m ncclbind.trace run serves one):
 *                         "PUT key hex\n" -> "OK\n"; "GET key\n" -> "hex\n" once the key is there
 * NCCLBIND_SHIM_STORE_TIMEOUT (seconds, default 300) bounds a get. Default: file: under
 * NCCLBIND_SHIM_DIR, else the temporary directory. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ncclbind_shim/shim_internal.h"

static const char *store_spec(char *fallback, size_t size) {
  const char *spec = getenv("NCCLBIND_SHIM_STORE");
  if (spec && *spec) return spec;
  const char *dir = getenv("NCCLBIND_SHIM_DIR");
  if (!dir || !*dir) dir = getenv("TMPDIR");
  snprintf(fallback, size, "file:%s/ncclbind-shim-store", dir && *dir ? dir : "/tmp");
  return fallback;
}

static double timeout_s(void) {
  const char *text = getenv("NCCLBIND_SHIM_STORE_TIMEOUT");
  double t = text && *text ? atof(text) : 300.0;
  return t > 0 ? t : 300.0;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int file_put(const char *dir, const char *key, const void *value, size_t size) {
  char path[4096], aside[4200];
  mkdir(dir, 0777);
  snprintf(path, sizeof path, "%s/%s", dir, key);
  snprintf(aside, sizeof aside, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(aside, "wb");
  if (!f || fwrite(value, 1, size, f) != size || fclose(f) != 0 || rename(aside, path) != 0) {
    nb_shim_set_error("store %s: cannot write %s: %s", dir, key, strerror(errno));
    return -1;
  }
  return 0;
}

static int file_get(const char *dir, const char *key, void *value, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, key);
  const double deadline = seconds() + timeout_s();
  for (;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t got = fread(value, 1, size, f);
      fclose(f);
      if (got == size) return 0;
    }
    if (seconds() > deadline) {
      nb_shim_set_error(
          "store %s: %s did not appear within %.0f s (NCCLBIND_SHIM_STORE_TIMEOUT): did rank 0 of the "
          "communicator restore?",
          dir, key, timeout_s());
      return -1;
    }
    usleep(2000);
  }
}

static int tcp_connect(const char *address) {
  char host[256];
  snprintf(host, sizeof host, "%s", address);
  char *colon = strrchr(host, ':');
  if (!colon) {
    nb_shim_set_error("NCCLBIND_SHIM_STORE=tcp:%s is not tcp:HOST:PORT", address);
    return -1;
  }
  *colon = 0;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found = NULL;
  if (getaddrinfo(host, colon + 1, &hints, &found) != 0 || !found) {
    nb_shim_set_error("store tcp:%s: cannot resolve the address", address);
    return -1;
  }
  int s = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || connect(s, found->ai_addr, found->ai_addrlen) != 0) {
    nb_shim_set_error("store tcp:%s: cannot connect: %s", address, strerror(errno));
    if (s >= 0) close(s);
    s = -1;
  }
  freeaddrinfo(found);
  if (s >= 0) {
    struct timeval tv = {.tv_sec = (long)timeout_s()};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  return s;
}

static int tcp_request(const char *address, const char *request, char *reply, size_t size) {
  int s = tcp_connect(address);
  if (s < 0) return -1;
  size_t left = strlen(request);
  const char *p = request;
  while (left) {
    ssize_t n = send(s, p, left, MSG_NOSIGNAL);
    if (n <= 0) {
      nb_shim_set_error("store tcp:%s: send failed: %s", address, strerror(errno));
      close(s);
      return -1;
    }
    p += n;
    left -= (size_t)n;
  }
  size_t used = 0;
  while (used + 1 < size) {
    ssize_t n = recv(s, reply + used, size - 1 - used, 0);
    if (n <= 0) break;
    used += (size_t)n;
    if (memchr(reply, '\n', used)) break;
  }
  close(s);
  reply[used] = 0;
  char *end = strchr(reply, '\n');
  if (!end) {
    nb_shim_set_error("store tcp:%s: no answer within %.0f s (NCCLBIND_SHIM_STORE_TIMEOUT)", address, timeout_s());
    return -1;
  }
  *end = 0;
  return 0;
}

int nb_shim_store_put(const char *key, const void *value, size_t size) {
  char fallback[4096];
  const char *spec = store_spec(fallback, sizeof fallback);
  if (!strncmp(spec, "file:", 5)) return file_put(spec + 5, key, value, size);
  if (!strncmp(spec, "tcp:", 4)) {
    char request[1024], reply[64];
    int n = snprintf(request, sizeof request, "PUT %s ", key);
    for (size_t i = 0; i < size && n + 3 < (int)sizeof request; ++i)
      n += snprintf(request + n, sizeof request - (size_t)n, "%02x", ((const unsigned char *)value)[i]);
    snprintf(request + n, sizeof request - (size_t)n, "\n");
    if (tcp_request(spec + 4, request, reply, sizeof reply) != 0) return -1;
    if (strcmp(reply, "OK") != 0) {
      nb_shim_set_error("store %s: PUT %s answered %s", spec, key, reply);
      return -1;
    }
    return 0;
  }
  nb_shim_set_error("NCCLBIND_SHIM_STORE=%s is neither file:DIR nor tcp:HOST:PORT", spec);
  return -1;
}

int nb_shim_store_get(const char *key, void *value, size_t size) {
  char fallback[4096];
  const char *spec = store_spec(fallback, sizeof fallback);
  if (!strncmp(spec, "file:", 5)) return file_get(spec + 5, key, value, size);
  if (!strncmp(spec, "tcp:", 4)) {
    char request[256], reply[1024];
    snprintf(request, sizeof request, "GET %s\n", key);
    if (tcp_request(spec + 4, request, reply, sizeof reply) != 0) return -1;
    if (strlen(reply) != 2 * size) {
      nb_shim_set_error("store %s: GET %s answered %.64s, not %zu hex bytes", spec, key, reply, size);
      return -1;
    }
    for (size_t i = 0; i < size; ++i) {
      unsigned byte;
      sscanf(reply + 2 * i, "%2x", &byte);
      ((unsigned char *)value)[i] = (unsigned char)byte;
    }
    return 0;
  }
  nb_shim_set_error("NCCLBIND_SHIM_STORE=%s is neither file:DIR nor tcp:HOST:PORT", spec);
  return -1;
}
