// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "util.h"

static char armed[64];
static unsigned int countdown;

void fault_init(void)
{
	const char *v = getenv("DEVGATE_FAULT");
	const char *colon;
	uint32_t n = 1;
	size_t len;

	if (!v || !*v)
		return;
	colon = strchr(v, ':');
	len = colon ? (size_t)(colon - v) : strlen(v);
	if (len == 0 || len >= sizeof(armed) || (colon && (parse_u32(colon + 1, &n) < 0 || !n))) {
		log_warning("ignoring DEVGATE_FAULT='%s': not NAME[:N]", v);
		return;
	}
	memcpy(armed, v, len);
	armed[len] = '\0';
	countdown = n;
	log_warning("fault point %s armed: devgated kills itself the %u. time it passes", armed, n);
}

void fault_point(const char *name)
{
	if (!armed[0] || strcmp(name, armed) != 0 || --countdown > 0)
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
