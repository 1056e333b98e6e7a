// SPDX-License-Identifier: Apache-2.0
/*
 * Small helpers shared by every binary: checked number parsing (no atoi),
 * reading files whole with a size cap, atomic file writes (write, rename),
 * paths and directories, clocks and time formats.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

static int parse_unsigned(const char *s, int base, unsigned long long max, unsigned long long *ret)
{
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (base == 10 ? !isdigit((unsigned char)*p) : (*p < '0' || *p > '7'))
			return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno == ERANGE || v > max)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_u32(const char *s, uint32_t *ret)
{
	unsigned long long v;
	int r = parse_unsigned(s, 10, UINT32_MAX, &v);

	if (r < 0)
		return r;
	*ret = (uint32_t)v;
	return 0;
}

int parse_u64(const char *s, uint64_t *ret)
{
	unsigned long long v;
	int r = parse_unsigned(s, 10, UINT64_MAX, &v);

	if (r < 0)
		return r;
	*ret = (uint64_t)v;
	return 0;
}

int parse_pid(const char *s, pid_t *ret)
{
	unsigned long long v;
	int r = parse_unsigned(s, 10, INT_MAX, &v);

	if (r < 0)
		return r;
	if (v == 0)
		return -ERANGE;
	*ret = (pid_t)v;
	return 0;
}

int parse_duration(const char *s, int64_t *ret)
{
	static const struct {
		char unit;
		int64_t secs;
	} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
	char digits[24];
	size_t n = 0;
	int64_t mult = 1;
	uint64_t v;

	if (!s)
		return -EINVAL;
	while (s[n] >= '0' && s[n] <= '9')
		n++;
	if (n == 0 || n >= sizeof(digits))
		return n ? -ERANGE : -EINVAL;
	if (s[n]) {
		size_t i;

		for (i = 0; i < ARRAY_SIZE(units) && units[i].unit != s[n]; i++)
			;
		if (i == ARRAY_SIZE(units) || s[n + 1])
			return -EINVAL;
		mult = units[i].secs;
	}
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (parse_u64(digits, &v) < 0)
		return -ERANGE;
	if (v == 0 || v > (uint64_t)(DURATION_MAX_S / mult))
		return -ERANGE;
	*ret = (int64_t)v * mult;
	return 0;
}

int parse_mode(const char *s, mode_t *ret)
{
	unsigned long long v;
	int r = parse_unsigned(s, 8, 07777, &v);

	if (r < 0)
		return r;
	*ret = (mode_t)v;
	return 0;
}

bool startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool path_on_bpffs(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

char *strstrip(char *s)
{
	size_t len;
	char *start = s;

	while (isspace((unsigned char)*start))
		start++;
	len = strlen(start);
	while (len && isspace((unsigned char)start[len - 1]))
		len--;
	memmove(s, start, len);
	s[len] = '\0';
	return s;
}

int read_fd_full(int fd, size_t max, char **ret, size_t *ret_len)
{
	auto_free char *buf = NULL;
	size_t len = 0, cap = max < 4096 ? max : 4096;

	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *nbuf;
			char probe;

			if (cap >= max) {
				/* Full at the limit: larger only if more bytes follow. */
				n = read(fd, &probe, 1);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					return -errno;
				if (n == 0)
					break;
				return -EFBIG;
			}
			cap = cap * 2 > max ? max : cap * 2;
			nbuf = realloc(buf, cap + 1);
			if (!nbuf)
				return -ENOMEM;
			buf = nbuf;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	*ret = TAKE_PTR(buf);
	return 0;
}

int read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len)
{
	auto_close int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return read_fd_full(fd, max, ret, ret_len);
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
			 bool durable)
{
	char tmp[PATH_MAX];
	auto_close int fd = -1;
	int r;

	r = snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	if (r < 0 || (size_t)r >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	r = write_all(fd, data, len);
	if (r == 0 && durable && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(dirfd, tmp, 0);
		return r;
	}
	/* The rename is durable only once the directory is. */
	if (durable && fsync(dirfd) < 0)
		return -errno;
	return 0;
}

int path_parent(const char *path, char *buf, size_t len, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash) {
		if (ret_name)
			*ret_name = path;
		return snprintf(buf, len, ".") < (int)len ? 0 : -ENAMETOOLONG;
	}
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(buf, path, n);
	buf[n] = '\0';
	if (ret_name)
		*ret_name = slash + 1;
	return 0;
}

int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

uint64_t now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t now_wall_s(void)
{
	return (int64_t)time(NULL);
}

int64_t now_wall_ms(void)
{
	return (int64_t)(now_real_ns() / 1000000ull);
}

int64_t now_wall_ceil_s(void)
{
	return (int64_t)((now_real_ns() + 999999999ull) / 1000000000ull);
}

void format_time_utc(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%lld", (long long)t);
}

uint64_t now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void format_time_utc_ms(int64_t ms, char *buf, size_t len)
{
	time_t tt = (time_t)(ms / 1000);
	struct tm tm;
	char secs[32];

	if (ms < 0 || !gmtime_r(&tt, &tm) ||
	    strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(buf, len, "%lld", (long long)ms);
		return;
	}
	snprintf(buf, len, "%s.%03dZ", secs, (int)(ms % 1000));
}
