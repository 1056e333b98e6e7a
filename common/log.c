// SPDX-License-Identifier: Apache-2.0
/*
 * Logging to stderr with levels, in journald's prefix form under systemd
 * (see log.h). It writes lines and nothing else: no file, no socket, no
 * allocation on the way.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static const char *log_ident = "devgate";
static int log_max_level = LOG_INFO;
static bool log_journal;

static const char *const level_names[] = {
	[LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",	  [LOG_CRIT] = "crit",
	[LOG_ERR] = "error",   [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
};

/* JOURNAL_STREAM is "DEV:INO" of the stream journald gave us. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

void log_init(const char *ident, int max_level)
{
	log_ident = ident;
	log_max_level = max_level;
	log_journal = stderr_is_journal();
}

void log_set_max_level(int level)
{
	log_max_level = level;
}

int log_get_max_level(void)
{
	return log_max_level;
}

bool log_is_journal(void)
{
	return log_journal;
}

static int log_va(int level, int err, const char *fmt, va_list ap)
{
	char buf[2048];

	if (err < 0)
		err = -err;
	if (level > log_max_level)
		return -err;
	errno = err; /* for %m */
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (log_journal)
		fprintf(stderr, "<%d>%s\n", level, buf);
	else
		fprintf(stderr, "%s: %s: %s\n", log_ident, level_names[level & 7], buf);
	errno = err;
	return -err;
}

int log_full_errno(int level, int err, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = log_va(level, err, fmt, ap);
	va_end(ap);
	return r;
}
