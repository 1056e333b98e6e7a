/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Scope-bound cleanup and explicit ownership transfer.
 *
 *   auto_free char *s = NULL;
 *   auto_close int fd = -1;
 *   ...
 *   *ret = TAKE_PTR(s);   // caller owns it now; cleanup sees NULL
 */
#ifndef DEVGATE_CLEANUP_H
#define DEVGATE_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>
#include <json-c/json.h>

#define auto_cleanup(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(const int *fd)
{
	if (*fd >= 0) {
		int saved = errno;

		close(*fd);
		errno = saved;
	}
}

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static inline void json_putp(json_object **o)
{
	if (*o)
		json_object_put(*o);
}

#define auto_free auto_cleanup(freep)
#define auto_close auto_cleanup(closep)
#define auto_fclose auto_cleanup(fclosep)
#define auto_closedir auto_cleanup(closedirp)
#define auto_json auto_cleanup(json_putp)

#define TAKE_PTR(p)                     \
	({                              \
		__typeof__(p) _p = (p); \
		(p) = NULL;             \
		_p;                     \
	})

#define TAKE_FD(fd)             \
	({                      \
		int _fd = (fd); \
		(fd) = -1;      \
		_fd;            \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Close and mark closed; returns -1 so it can be assigned back. */
static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;

		close(fd);
		errno = saved;
	}
	return -1;
}

#endif
