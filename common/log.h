/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging to stderr. Under systemd (JOURNAL_STREAM names our stderr) each
 * line carries a "<N>" priority prefix that journald understands; otherwise
 * lines read "IDENT: LEVEL: message".
 *
 * The *_errno variants return -abs(err) so a caller can log and return in
 * one statement, and set errno so "%m" prints the right text.
 */
#ifndef DEVGATE_LOG_H
#define DEVGATE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

void log_init(const char *ident, int max_level);
void log_set_max_level(int level);
int log_get_max_level(void);
bool log_is_journal(void);

int log_full_errno(int level, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Writes s to out (len bytes, NUL included) as every log line is written:
 * control characters and bytes that are not valid UTF-8 as \xNN, C1
 * controls and the invisible characters that change how a line reads
 * (bidirectional overrides and isolates, zero-width characters, line
 * separators) as \uXXXX, a backslash as two; other UTF-8 as it is. What
 * does not fit ends in "...". Returns the length written.
 */
size_t log_escape(const char *s, char *out, size_t len);

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, (e), __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)

#endif
