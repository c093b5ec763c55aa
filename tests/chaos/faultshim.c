/* LD_PRELOAD shim for one tidelog node: clock jumps, a slow disk, failing writes.
 *
 * Built by tests/chaos/shim.py with the system C compiler. Controlled through a small
 * text file named by CHAOS_SHIM_CTL, re-read at most every 100 ms:
 *     <clock offset ms> <slow ms per write> <eio 0|1>
 * - clock_gettime(CLOCK_REALTIME*) returns the real time plus the offset (the monotonic
 *   clock is left alone, as a wall-clock jump on a real machine leaves it);
 * - write, pwrite64, writev and fsync/fdatasync on a file under CHAOS_SHIM_DIR (the
 *   node's data directory) first sleep the slow milliseconds, and fail with EIO when eio
 *   is 1. Sockets, pipes and the node's own log file are never touched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static volatile long long offset_ms;
static volatile long slow_ms;
static volatile int eio;
static long long next_refresh_ns;
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve(void) {
    if (real_clock_gettime) return;
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
}

/* Re-read the control file when 100 ms have passed; one thread at a time, others go on
 * with the values they have. */
static void refresh(void) {
    struct timespec now;
    resolve();
    real_clock_gettime(CLOCK_MONOTONIC, &now);
    long long ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    if (ns < next_refresh_ns || pthread_mutex_trylock(&refresh_lock) != 0) return;
    next_refresh_ns = ns + 100000000LL;
    const char *path = getenv("CHAOS_SHIM_CTL");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f) {
        long long o = 0; long s = 0; int e = 0;
        if (fscanf(f, "%lld %ld %d", &o, &s, &e) == 3) { offset_ms = o; slow_ms = s; eio = e; }
        fclose(f);
    }
    pthread_mutex_unlock(&refresh_lock);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    refresh();
    int rc = real_clock_gettime(clk, ts);
    if (rc == 0 && offset_ms != 0 &&
        (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ms * 1000000LL;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return rc;
}

/* 1 when the call must fail with EIO; sleeps first when the disk is slow. */
static int disk_fault(int fd) {
    refresh();
    if (slow_ms == 0 && !eio) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const char *dir = getenv("CHAOS_SHIM_DIR");
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (!dir || n <= 0) return 0;
    target[n] = 0;
    if (strncmp(target, dir, strlen(dir)) != 0) return 0;
    if (slow_ms > 0) usleep((useconds_t)slow_ms * 1000);
    return eio;
}

ssize_t write(int fd, const void *buf, size_t len) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    return real_write(fd, buf, len);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    return real_pwrite64(fd, buf, len, off);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    return real_writev(fd, iov, count);
}

int fsync(int fd) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    return real_fdatasync(fd);
}
