/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_UTIL_H
#define DEVGATE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Whole-string decimal parsers; no sign, no spaces, no trailing junk. */
int parse_u32(const char *s, uint32_t *ret);
int parse_u64(const char *s, uint64_t *ret);
int parse_pid(const char *s, pid_t *ret);
/* Octal file mode such as "0666" (at most 07777). */
int parse_mode(const char *s, mode_t *ret);

/* The longest lease time to live (--ttl, extend): 366 days. */
#define DURATION_MAX_S (366LL * 24 * 3600)
/*
 * A duration such as "90s", "10m", "2h", "1d" or "300" (seconds) into
 * seconds: digits, then at most one unit. -EINVAL for anything else
 * (signs, spaces, fractions, unknown units), -ERANGE for 0 or more than
 * DURATION_MAX_S.
 */
int parse_duration(const char *s, int64_t *ret);

bool startswith(const char *s, const char *prefix);
/* True when path is on a bpf filesystem. */
bool path_on_bpffs(const char *path);
/* Strips leading and trailing white space in place; returns s. */
char *strstrip(char *s);

/*
 * Reads a whole file relative to dirfd (AT_FDCWD for plain paths), refusing
 * anything larger than max bytes (-EFBIG). The result is NUL-terminated.
 */
int read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len);
int read_fd_full(int fd, size_t max, char **ret, size_t *ret_len);

/*
 * Replaces dirfd/name atomically. Write to a temporary file, then rename over name: readers see the
 * old or the new content, never a mix. durable: fsync the file and the directory too, so the new
 * content survives a power loss (not needed for state that dies with a reboot anyway, on tmpfs).
 */
int write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
			 bool durable);

/*
 * The directory part of path ("." when it has none, "/" for a file at the
 * root) into buf; *ret_name points at the last component within path.
 */
int path_parent(const char *path, char *buf, size_t len, const char **ret_name);

/* mkdir -p with the given mode for components it creates. */
int mkdir_p(const char *path, mode_t mode);

/* Monotonic and wall clocks in nanoseconds / seconds. */
uint64_t now_mono_ns(void);
int64_t now_wall_s(void);
/* CLOCK_REALTIME in milliseconds. */
int64_t now_wall_ms(void);
/* CLOCK_REALTIME rounded up to a whole second: a ttl counted from it is never short. */
int64_t now_wall_ceil_s(void);

/* Formats a Unix time as RFC 3339 UTC ("2026-11-21T15:28:10Z"). */
void format_time_utc(int64_t t, char *buf, size_t len);
/* The same from milliseconds, with them: "2026-11-21T15:28:10.123Z". */
void format_time_utc_ms(int64_t ms, char *buf, size_t len);
/* CLOCK_REALTIME in nanoseconds. */
uint64_t now_real_ns(void);

#endif
