// SPDX-License-Identifier: Apache-2.0
/* Which kernel uevents make devgated re-read its inventory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "inventory/rescan.h"

/* A kernel uevent: "ACTION@DEVPATH" then KEY=VALUE fields, each NUL-terminated. */
#define EV(...) ev_relevant((const char *[]){ __VA_ARGS__, NULL })

static bool ev_relevant(const char **fields)
{
	char buf[1024];
	size_t len = 0;

	for (size_t i = 0; fields[i]; i++) {
		size_t n = strlen(fields[i]) + 1;

		assert_true(len + n <= sizeof(buf));
		memcpy(buf + len, fields[i], n);
		len += n;
	}
	return rescan_uevent_relevant(buf, len);
}

static void test_gpu_events(void **state)
{
	(void)state;
	/* A GPU falls off the bus: the PCI remove of a display controller. */
	assert_true(EV("remove@/devices/pci0000:00/0000:00:01.0/0000:3b:00.0", "ACTION=remove",
		       "DEVPATH=/devices/pci0000:00/0000:00:01.0/0000:3b:00.0", "SUBSYSTEM=pci",
		       "PCI_CLASS=30200", "PCI_ID=10DE:2330", "SEQNUM=4711"));
	/* Its driver binds (the GPU's /proc/driver/nvidia entry appears then). */
	assert_true(EV("bind@/devices/pci0000:00/0000:3b:00.0", "ACTION=bind", "SUBSYSTEM=pci",
		       "DRIVER=nvidia", "PCI_CLASS=68000"));
	assert_true(EV("add@/devices/pci0000:00/0000:3b:00.0", "ACTION=add", "SUBSYSTEM=pci",
		       "PCI_CLASS=30000", "PCI_ID=1002:740F"));
	/* A driver reload: the nvidia modules come and go. */
	assert_true(EV("remove@/module/nvidia_uvm", "ACTION=remove", "DEVPATH=/module/nvidia_uvm",
		       "SUBSYSTEM=module"));
}

static void test_drm_events(void **state)
{
	(void)state;
	/* AMD's and Intel's GPUs: their render nodes and drivers. */
	assert_true(EV("add@/devices/pci0000:80/0000:80:00.0/drm/renderD128", "ACTION=add",
		       "SUBSYSTEM=drm", "DEVNAME=dri/renderD128"));
	assert_true(EV("add@/module/amdgpu", "ACTION=add", "DEVPATH=/module/amdgpu",
		       "SUBSYSTEM=module"));
	assert_true(
		EV("remove@/module/xe", "ACTION=remove", "DEVPATH=/module/xe", "SUBSYSTEM=module"));
	assert_false(EV("add@/module/amdgpu_x", "ACTION=add", "DEVPATH=/module/amdgpu_x",
			"SUBSYSTEM=module"));
}

static void test_other_events(void **state)
{
	(void)state;
	assert_false(EV("add@/devices/virtual/net/veth0", "ACTION=add", "SUBSYSTEM=net"));
	assert_false(
		EV("add@/module/loop", "ACTION=add", "DEVPATH=/module/loop", "SUBSYSTEM=module"));
	/* A NIC on the PCI bus is none of ours. */
	assert_false(EV("add@/devices/pci0000:00/0000:05:00.0", "ACTION=add", "SUBSYSTEM=pci",
			"PCI_CLASS=20000", "PCI_ID=8086:1572", "DRIVER=i40e"));
	assert_false(EV("change@/devices/x", "ACTION=change"));
	/* A key cut off at the end of the message is not read past it. */
	assert_false(rescan_uevent_relevant("SUBSYSTEM=pci\0PCI_CLASS=3", 25));
	assert_false(rescan_uevent_relevant("", 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_events),
		cmocka_unit_test(test_drm_events),
		cmocka_unit_test(test_other_events),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
