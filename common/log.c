// SPDX-License-Identifier: Apache-2.0
/*
 * Logging to stderr with levels, in journald's prefix form under systemd
 * (see log.h). It writes lines and nothing else: no file, no socket, no
 * allocation on the way. Every line is escaped on the way out (log_escape):
 * messages carry strings that clients, containers and images supply, and
 * none of them may forge a line, reorder the text a reader sees or hide
 * bytes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
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

/*
 * Length of the UTF-8 sequence at s (1 to 4) and its code point in *cp, or
 * 0 when s does not start a valid, shortest-form sequence of a scalar value.
 */
static size_t utf8_char(const unsigned char *s, uint32_t *cp)
{
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	uint32_t c = s[0] & (0x3f >> (n - 1));

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0; /* a continuation byte, an overlong lead or beyond U+10FFFF */
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/*
 * Code points shown as \uXXXX: C1 controls, and the invisible ones that
 * change how a line reads (bidirectional overrides, embeddings and
 * isolates, zero-width characters, line and paragraph separators).
 */
static bool hidden(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x061c || (c >= 0x200b && c <= 0x200f) ||
	       (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x2069) || c == 0xfeff;
}

size_t log_escape(const char *s, char *out, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	if (!len)
		return 0;
	while (*p) {
		char piece[8];
		uint32_t c = 0;
		size_t n = *p < 0x80 ? 1 : utf8_char(p, &c), w;

		if (*p == '\\')
			w = (size_t)snprintf(piece, sizeof(piece), "\\\\");
		else if (*p < 0x20 || *p == 0x7f || n == 0)
			w = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *p);
		else if (n > 1 && hidden(c))
			w = (size_t)snprintf(piece, sizeof(piece), "\\u%04x", (unsigned int)c);
		else
			w = (size_t)snprintf(piece, sizeof(piece), "%.*s", (int)n, (const char *)p);
		/* What does not fit is cut at a whole character, and the cut is shown. */
		if (o + w + 4 > len) {
			if (o + 4 <= len) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, piece, w);
		o += w;
		p += n ? n : 1;
	}
	out[o] = '\0';
	return o;
}

static int log_va(int level, int err, const char *fmt, va_list ap)
{
	char buf[2048], line[4096];

	if (err < 0)
		err = -err;
	if (level > log_max_level)
		return -err;
	errno = err; /* for %m */
	vsnprintf(line, sizeof(line), fmt, ap);
	log_escape(line, buf, sizeof(buf));
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
