// SPDX-License-Identifier: Apache-2.0
/*
 * Fault points for the crash and race tests (DEVGATE_FAULT, see fault.h)
 * and the seccomp probe of confinement.bats. Unset, a fault point costs one
 * comparison; nothing here runs in production unless a test's environment
 * variable asks for it.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "util.h"

#define FAULT_PAUSE_MAX_MS 60000

static char armed[64];
static unsigned int countdown;
static uint32_t pause_ms; /* 0: kill; else pause this long at every pass */

void fault_init(void)
{
	const char *v = getenv("DEVGATE_FAULT");
	const char *colon;
	uint32_t n = 1;
	size_t len;
	bool ok;

	if (!v || !*v)
		return;
	colon = strchr(v, ':');
	len = colon ? (size_t)(colon - v) : strlen(v);
	if (colon && strncmp(colon + 1, "pause=", 6) == 0)
		ok = parse_u32(colon + 7, &pause_ms) == 0 && pause_ms > 0 &&
		     pause_ms <= FAULT_PAUSE_MAX_MS;
	else
		ok = !colon || (parse_u32(colon + 1, &n) == 0 && n);
	if (len == 0 || len >= sizeof(armed) || !ok) {
		log_warning("ignoring DEVGATE_FAULT='%s': not NAME[:N] or NAME:pause=MS", v);
		pause_ms = 0;
		return;
	}
	memcpy(armed, v, len);
	armed[len] = '\0';
	countdown = n;
	if (pause_ms)
		log_warning("fault point %s armed: devgated pauses %u ms every time it passes",
			    armed, pause_ms);
	else
		log_warning("fault point %s armed: devgated kills itself the %u. time it passes",
			    armed, n);
}

static void fault_pause(const char *name)
{
	struct timespec ts = { .tv_sec = pause_ms / 1000,
			       .tv_nsec = (long)(pause_ms % 1000) * 1000000L };

	log_warning("fault point %s: pausing %u ms", name, pause_ms);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		continue;
	log_warning("fault point %s: going on", name);
}

void fault_point(const char *name)
{
	if (!armed[0] || strcmp(name, armed) != 0)
		return;
	if (pause_ms) {
		fault_pause(name);
		return;
	}
	if (--countdown > 0)
		return;
	log_warning("fault point %s: SIGKILL", name);
	kill(getpid(), SIGKILL);
}

void fault_seccomp_probe(void)
{
	const char *v = getenv("DEVGATE_TEST_SECCOMP_PROBE");

	if (!v || !*v)
		return;
	if (strcmp(v, "io_setup") == 0) {
		long r = syscall(SYS_io_setup, 0, NULL);

		log_warning("seccomp probe: io_setup: %s", r < 0 ? strerrorname_np(errno) : "0");
	} else if (strcmp(v, "execve") == 0) {
		char *const argv[] = { (char *)"true", NULL };

		log_warning("seccomp probe: execve /bin/true");
		execve("/bin/true", argv, argv + 1);
		log_warning("seccomp probe: execve: %s", strerrorname_np(errno));
	} else {
		log_warning("ignoring DEVGATE_TEST_SECCOMP_PROBE='%s': not io_setup or execve", v);
	}
}
