/* LD_PRELOAD shim for one tidelog node: clock jumps, a slow disk, failing writes and reads.
 *
 * Built by tests/chaos/shim.py with the system C compiler. Controlled through a small
 * text file named by CHAOS_SHIM_CTL, re-read at most every 100 ms:
 *     <clock offset ms> <slow ms per write> <eio 0|1> [<read eio 0|1>]
 * - clock_gettime(CLOCK_REALTIME*) returns the real time plus the offset (the monotonic
 *   clock is left alone, as a wall-clock jump on a real machine leaves it);
 * - write, pwrite64, writev and fsync/fdatasync on a file under CHAOS_SHIM_DIR (the
 *   node's data directory) first sleep the slow milliseconds, and fail with EIO when eio
 *   is 1;
 * - read, pread64, readv, preadv64 from, and sendfile/sendfile64 out of, such a file fail
 *   with EIO when read eio is 1 (memory-mapped index reads cannot be reached this way).
 * Sockets, pipes and the node's own log file are never touched.
 *
 * With CHAOS_SHIM_SYNCED naming a file, the shim also keeps a journal there of what is
 * durable, for a simulated power cut (tests/chaos/power.py): after each successful
 * fsync/fdatasync of a regular file under CHAOS_SHIM_DIR a line `S<TAB><size><TAB><path>`, after
 * a successful syncfs one such line for every regular file under it, and after a rename
 * under it `R<TAB><old path><TAB><new path>`. Appended with O_APPEND, so a kill -9 loses nothing
 * already written.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
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
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_pread64)(int, void *, size_t, off_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static ssize_t (*real_preadv64)(int, const struct iovec *, int, off_t);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_sendfile64)(int, int, off_t *, size_t);
static int (*real_syncfs)(int);
static int (*real_rename)(const char *, const char *);

static volatile long long offset_ms;
static volatile long slow_ms;
static volatile int eio;
static volatile int read_eio;
static long long next_refresh_ns;
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve(void) {
    if (real_clock_gettime) return;
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_read = dlsym(RTLD_NEXT, "read");
    real_pread64 = dlsym(RTLD_NEXT, "pread64");
    real_readv = dlsym(RTLD_NEXT, "readv");
    real_preadv64 = dlsym(RTLD_NEXT, "preadv64");
    real_sendfile = dlsym(RTLD_NEXT, "sendfile");
    real_sendfile64 = dlsym(RTLD_NEXT, "sendfile64");
    real_syncfs = dlsym(RTLD_NEXT, "syncfs");
    real_rename = dlsym(RTLD_NEXT, "rename");
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
        long long o = 0; long s = 0; int e = 0, r = 0;
        int n = fscanf(f, "%lld %ld %d %d", &o, &s, &e, &r);
        if (n >= 3) { offset_ms = o; slow_ms = s; eio = e; read_eio = n == 4 ? r : 0; }
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

/* 1 when fd is a regular file under CHAOS_SHIM_DIR. */
static int in_data_dir(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const char *dir = getenv("CHAOS_SHIM_DIR");
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (!dir || n <= 0) return 0;
    target[n] = 0;
    return strncmp(target, dir, strlen(dir)) == 0;
}

/* 1 when a write must fail with EIO; sleeps first when the disk is slow. */
static int disk_fault(int fd) {
    refresh();
    if (slow_ms == 0 && !eio) return 0;
    if (!in_data_dir(fd)) return 0;
    if (slow_ms > 0) usleep((useconds_t)slow_ms * 1000);
    return eio;
}

/* 1 when a read must fail with EIO. */
static int read_fault(int fd) {
    refresh();
    return read_eio && in_data_dir(fd);
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

/* The journal of what is durable; -1 when none is kept (or it cannot be opened). */
static int journal(void) {
    static int fd = -2;
    if (fd == -2) {
        const char *path = getenv("CHAOS_SHIM_SYNCED");
        fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    }
    return fd;
}

static void journal_line(const char *line) {
    int fd = journal();
    if (fd >= 0) real_write(fd, line, strlen(line));
}

/* After a successful fsync/fdatasync of fd: its size is durable. */
static void note_synced(int fd) {
    if (journal() < 0 || !in_data_dir(fd)) return;
    struct stat st;
    char link[64], target[PATH_MAX], line[PATH_MAX + 64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0 || fstat(fd, &st) != 0) return;
    target[n] = 0;
    snprintf(line, sizeof line, "S\t%lld\t%s\n", (long long)st.st_size, target);
    journal_line(line);
}

static int note_file(const char *path, const struct stat *st, int kind, struct FTW *ftw) {
    (void)ftw;
    if (kind == FTW_F && S_ISREG(st->st_mode)) {
        char line[PATH_MAX + 64];
        snprintf(line, sizeof line, "S\t%lld\t%s\n", (long long)st->st_size, path);
        journal_line(line);
    }
    return 0;
}

int fsync(int fd) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    int r = real_fsync(fd);
    if (r == 0) note_synced(fd);
    return r;
}

int fdatasync(int fd) {
    resolve();
    if (disk_fault(fd)) { errno = EIO; return -1; }
    int r = real_fdatasync(fd);
    if (r == 0) note_synced(fd);
    return r;
}

int syncfs(int fd) {
    resolve();
    int r = real_syncfs(fd);
    const char *dir = getenv("CHAOS_SHIM_DIR");
    if (r == 0 && dir && journal() >= 0) nftw(dir, note_file, 16, FTW_PHYS);
    return r;
}

/* The absolute form of path, which may no longer exist (its directory does). */
static void absolute(const char *path, char *out) {
    char copy[PATH_MAX], dir[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    const char *base = basename(copy);
    char copy2[PATH_MAX];
    snprintf(copy2, sizeof copy2, "%s", path);
    if (!realpath(dirname(copy2), dir)) { snprintf(out, PATH_MAX, "%s", path); return; }
    snprintf(out, PATH_MAX, "%s/%s", dir, base);
}

int rename(const char *from, const char *to) {
    resolve();
    int r = real_rename(from, to);
    const char *dir = getenv("CHAOS_SHIM_DIR");
    if (r == 0 && dir && journal() >= 0) {
        char a[PATH_MAX], b[PATH_MAX], line[2 * PATH_MAX + 8];
        absolute(from, a);
        absolute(to, b);
        if (strncmp(b, dir, strlen(dir)) == 0) {
            snprintf(line, sizeof line, "R\t%s\t%s\n", a, b);
            journal_line(line);
        }
    }
    return r;
}

ssize_t read(int fd, void *buf, size_t len) {
    resolve();
    if (read_fault(fd)) { errno = EIO; return -1; }
    return real_read(fd, buf, len);
}

ssize_t pread64(int fd, void *buf, size_t len, off_t off) {
    resolve();
    if (read_fault(fd)) { errno = EIO; return -1; }
    return real_pread64(fd, buf, len, off);
}

ssize_t readv(int fd, const struct iovec *iov, int count) {
    resolve();
    if (read_fault(fd)) { errno = EIO; return -1; }
    return real_readv(fd, iov, count);
}

ssize_t preadv64(int fd, const struct iovec *iov, int count, off_t off) {
    resolve();
    if (read_fault(fd)) { errno = EIO; return -1; }
    return real_preadv64(fd, iov, count, off);
}

ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
    resolve();
    if (read_fault(in_fd)) { errno = EIO; return -1; }
    return real_sendfile(out_fd, in_fd, offset, count);
}

ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count) {
    resolve();
    if (read_fault(in_fd)) { errno = EIO; return -1; }
    return real_sendfile64(out_fd, in_fd, offset, count);
}
