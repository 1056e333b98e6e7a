// SPDX-License-Identifier: Apache-2.0
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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
