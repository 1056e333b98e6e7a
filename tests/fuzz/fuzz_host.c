// SPDX-License-Identifier: Apache-2.0
/*
 * What devgated reads from the host and from its own files: /proc/devices,
 * the driver's per-GPU information, PCI addresses, mountinfo,
 * /proc/PID/cgroup, devgate.conf (its policy lines too), lease records,
 * kernel uevents, the words of a request that name a GPU's kind, the
 * driver's version file and the host-device words of devgate.conf.
 */
#include <sys/sysmacros.h>

#include "proccg.h"
#include "sys/cgroup.h"
#include "core/config.h"
#include "core/daemon.h"
#include "driver.h"
#include "lease/hostdev.h"
#include "fuzz.h"
#include "gpu.h"
#include "gpu_arch.h"
#include "jsonutil.h"
#include "lease/lease.h"
#include "lease/record.h"
#include "mountinfo.h"
#include "inventory/rescan.h"

int bpfgate_guard_sync_both(struct bpfgate *bg, const struct dg_inventory *inv,
			    const struct dg_inventory *also)
{
	(void)bg;
	(void)inv;
	(void)also;
	return 0;
}

/* ... and moves the leases to a reloaded driver's numbers; there are none here. */
size_t refresh_leases(struct daemon *d)
{
	(void)d;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* rescan.c refreshes the gate's guarded majors; there is no gate here. */
int bpfgate_guard_sync(struct bpfgate *bg, const struct dg_inventory *inv)
{
	(void)bg;
	(void)inv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size), *s = NULL, pci[32], why[256];
	struct dg_majors m;
	struct dg_gpu g = { 0 };
	struct dg_config c;
	struct dg_error err = { 0 };
	struct lease *l = NULL;
	json_object *o;

	uint64_t mib;
	unsigned int cc, caps;
	char version[32];
	uint32_t acc;

	(void)rescan_uevent_relevant((const char *)data, size);
	if (!text)
		return 0;
	(void)gpu_size_parse(text, &mib);
	(void)gpu_cc_parse(text, &cc);
	(void)gpu_memory_from_model(text);
	(void)gpu_kind(0x10de, 0xffff, text);
	(void)gpu_arch_canonical(text);
	(void)proc_devices_parse(text, &m);
	(void)gpu_info_parse(text, &g);
	(void)pci_normalize(text, pci, sizeof(pci));
	(void)driver_version_parse(text, version, sizeof(version));
	(void)driver_caps_parse(text, &caps, why, sizeof(why));
	(void)lease_access_parse(text, &acc);
	(void)hostdev_breakout(makedev(1, 1), text);
	if (mountinfo_find_cgroup2(text, NULL, &s) == 0)
		free(s);
	s = NULL;
	if (proc_cgroup_parse(text, &s) == 0)
		free(s);
	if (config_init(&c) == 0) {
		(void)config_parse(&c, "fuzz.conf", text, &err);
		config_free(&c);
	}
	o = json_parse_object(text);
	if (o && record_decode(o, &l, why, sizeof(why)) == 0)
		lease_free(l);
	json_object_put(o);
	free(text);
	return 0;
}
