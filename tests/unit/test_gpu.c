// SPDX-License-Identifier: Apache-2.0
/* Parsers of the driver's files, discovery on a fixture tree, selectors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"
#include "gpu.h"
#include "gpu_arch.h"
#include "select.h"
#include "util.h"

static void test_proc_devices_new_driver(void **state)
{
	struct dg_majors m;

	(void)state;
	proc_devices_parse("Character devices:\n  1 mem\n195 nvidia\n508 nvidia-uvm\n\n"
			   "Block devices:\n195 nvidia\n",
			   &m);
	assert_true(m.has_nvidia);
	assert_int_equal(m.nvidia, 195);
	assert_true(m.has_uvm);
	assert_int_equal(m.uvm, 508);
}

static void test_proc_devices_old_driver_no_uvm(void **state)
{
	struct dg_majors m;

	(void)state;
	proc_devices_parse("Character devices:\n195 nvidia-frontend\n241 nvidia-caps\n", &m);
	assert_true(m.has_nvidia);
	assert_int_equal(m.nvidia, 195);
	assert_false(m.has_uvm);
}

static void test_proc_devices_block_only(void **state)
{
	struct dg_majors m;

	(void)state;
	/* A block device of that name is not the GPU driver. */
	proc_devices_parse("Character devices:\n  1 mem\nBlock devices:\n195 nvidia\n", &m);
	assert_false(m.has_nvidia);
	proc_devices_parse("", &m);
	assert_false(m.has_nvidia);
}

static const char info_ok[] = "Model: \t\t NVIDIA A100-SXM4-40GB\n"
			      "IRQ:   \t\t 42\n"
			      "GPU UUID: \t GPU-1b2c3d4e-0000-1111-2222-333344445555\n"
			      "Bus Location: \t 0000:3B:00.0\n"
			      "Device Minor: \t 3\n";

static void test_info_parse(void **state)
{
	struct dg_gpu g = { 0 };

	(void)state;
	assert_int_equal(gpu_info_parse(info_ok, &g), 0);
	assert_string_equal(g.model, "NVIDIA A100-SXM4-40GB");
	assert_string_equal(g.uuid, "GPU-1b2c3d4e-0000-1111-2222-333344445555");
	assert_string_equal(g.pci, "0000:3b:00.0");
	assert_int_equal(g.minor, 3);
}

static void test_info_parse_rejects(void **state)
{
	struct dg_gpu g = { 0 };

	(void)state;
	assert_int_equal(gpu_info_parse("Model: x\nDevice Minor: 1\n", &g), -EINVAL);
	assert_int_equal(gpu_info_parse("GPU UUID: GPU-12345678\nDevice Minor: x1\n", &g), -EINVAL);
	assert_int_equal(gpu_info_parse("GPU UUID: GPU-12345678\nDevice Minor: 255\n", &g),
			 -EINVAL);
	assert_int_equal(gpu_info_parse("GPU UUID: GPU-1234/../x\nDevice Minor: 1\n", &g), -EINVAL);
	assert_int_equal(gpu_info_parse("GPU UUID: GPU-12345678\nDevice Minor: 1\n"
					"Bus Location: zz\n",
					&g),
			 -EINVAL);
}

static void test_pci_normalize(void **state)
{
	char out[32];

	(void)state;
	assert_int_equal(pci_normalize("00000000:18:00.0", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:18:00.0");
	assert_int_equal(pci_normalize("18:00.0", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:18:00.0");
	assert_int_equal(pci_normalize("0000:AF:1f.7", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:af:1f.7");
	assert_int_equal(pci_normalize("0000:18:20.0", out, sizeof(out)), -EINVAL);
	assert_int_equal(pci_normalize("0000:18:00.0x", out, sizeof(out)), -EINVAL);
	assert_int_equal(pci_normalize("18.00.0", out, sizeof(out)), -EINVAL);
	assert_int_equal(pci_normalize("", out, sizeof(out)), -EINVAL);
}

static void test_arch(void **state)
{
	(void)state;
	assert_string_equal(gpu_arch(0x10de, 0x2330, "NVIDIA H100 80GB HBM3"), "hopper");
	assert_string_equal(gpu_arch(0x10de, 0x20b0, ""), "ampere");
	assert_string_equal(gpu_arch(0x10de, 0x1eb8, NULL), "turing");
	assert_string_equal(gpu_arch(0x10de, 0x1db1, NULL), "volta");
	assert_string_equal(gpu_arch(0x10de, 0x27b8, NULL), "ada");
	/* Not in pci.ids 2023: known by the model's product token. */
	assert_string_equal(gpu_arch(0x10de, 0x2335, "NVIDIA H200"), "hopper");
	assert_string_equal(gpu_arch(0x10de, 0x2901, "NVIDIA B200"), "blackwell");
	/* Tokens are whole: A10 is not A100, and nothing is guessed. */
	assert_string_equal(gpu_arch(0x10de, 0xffff, "NVIDIA A10"), "ampere");
	assert_string_equal(gpu_arch(0x10de, 0xffff, "NVIDIA A1000X"), "unknown");
	assert_string_equal(gpu_arch(0x10de, 0xffff, "Mystery Board"), "unknown");
	assert_string_equal(gpu_arch(0x1002, 0x2330, "Other vendor"), "unknown");
	assert_true(gpu_arch_is_known_name("hopper"));
	assert_false(gpu_arch_is_known_name("unknown"));
}

/* Every family from Fermi on, by PCI id (pci.ids) and by model name alone. */
static void test_arch_families(void **state)
{
	static const struct {
		uint16_t device;
		const char *model;
		const char *arch;
		unsigned int cc;
	} cases[] = {
		{ 0x1091, "Tesla M2090", "fermi", 20 },
		{ 0xffff, "Tesla M2090", "fermi", 20 },
		{ 0x0de1, "GeForce GT 430", "fermi", 21 },
		{ 0x102d, "Tesla K80", "kepler", 37 },
		{ 0xffff, "Tesla K80", "kepler", 37 },
		{ 0x1023, "Tesla K40m", "kepler", 35 },
		{ 0x17fd, "Tesla M40", "maxwell", 52 },
		{ 0x15f8, "Tesla P100-PCIE-16GB", "pascal", 60 },
		{ 0x1db1, "Tesla V100-SXM2-16GB", "volta", 70 },
		{ 0x1eb8, "Tesla T4", "turing", 75 },
		{ 0x20b0, "NVIDIA A100-SXM4-40GB", "ampere", 80 },
		{ 0x2236, "NVIDIA A10", "ampere", 86 },
		{ 0x27b8, "NVIDIA L4", "ada", 89 },
		{ 0x2330, "NVIDIA H100 80GB HBM3", "hopper", 90 },
		{ 0xffff, "H100", "hopper", 90 },
		{ 0x2901, "NVIDIA B200", "blackwell", 100 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gpu_kind k = gpu_kind(0x10de, cases[i].device, cases[i].model);

		assert_string_equal(k.arch, cases[i].arch);
		assert_int_equal(k.cc, cases[i].cc);
	}
	assert_int_equal(gpu_kind(0x10de, 0xffff, "Mystery Board").cc, 0);
}

/* The words a user writes for a family, in any case. */
static void test_arch_names(void **state)
{
	(void)state;
	assert_string_equal(gpu_arch_canonical("Hopper"), "hopper");
	assert_string_equal(gpu_arch_canonical("FERMI"), "fermi");
	assert_string_equal(gpu_arch_canonical("Ada-Lovelace"), "ada");
	assert_string_equal(gpu_arch_canonical("lovelace"), "ada");
	assert_string_equal(gpu_arch_canonical("unknown"), "unknown");
	assert_null(gpu_arch_canonical("tesla"));
	assert_null(gpu_arch_canonical(""));
	assert_true(gpu_arch_is_known_name("Blackwell"));
}

static void test_cc_parse(void **state)
{
	unsigned int cc = 1;
	char buf[16];

	(void)state;
	assert_int_equal(gpu_cc_parse("8.0", &cc), 0);
	assert_int_equal(cc, 80);
	assert_int_equal(gpu_cc_parse("8.6", &cc), 0);
	assert_int_equal(cc, 86);
	assert_int_equal(gpu_cc_parse("9", &cc), 0);
	assert_int_equal(cc, 90);
	assert_int_equal(gpu_cc_parse("10.0", &cc), 0);
	assert_int_equal(cc, 100);
	assert_int_equal(gpu_cc_parse("", &cc), -EINVAL);
	assert_int_equal(gpu_cc_parse("8.", &cc), -EINVAL);
	assert_int_equal(gpu_cc_parse("8.10", &cc), -EINVAL);
	assert_int_equal(gpu_cc_parse("0.5", &cc), -EINVAL);
	assert_int_equal(gpu_cc_parse("x8.0", &cc), -EINVAL);
	assert_int_equal(gpu_cc_parse("-8.0", &cc), -EINVAL);
	assert_int_equal(gpu_cc_parse("100.0", &cc), -EINVAL);
	gpu_cc_format(120, buf, sizeof(buf));
	assert_string_equal(buf, "12.0");
	gpu_cc_format(0, buf, sizeof(buf));
	assert_string_equal(buf, "");
}

static void test_size_parse(void **state)
{
	uint64_t mib = 7;

	(void)state;
	assert_int_equal(gpu_size_parse("40G", &mib), 0);
	assert_int_equal(mib, 40 * 1024);
	assert_int_equal(gpu_size_parse("16GiB", &mib), 0);
	assert_int_equal(mib, 16 * 1024);
	assert_int_equal(gpu_size_parse("80gb", &mib), 0);
	assert_int_equal(mib, 80 * 1024);
	assert_int_equal(gpu_size_parse("512M", &mib), 0);
	assert_int_equal(mib, 512);
	assert_int_equal(gpu_size_parse("1T", &mib), 0);
	assert_int_equal(mib, 1024 * 1024);
	mib = 7;
	assert_int_equal(gpu_size_parse("40", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("0G", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("1.5G", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("G", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("40Gx", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("-4G", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("99999999999999999999G", &mib), -EINVAL);
	assert_int_equal(gpu_size_parse("9999999999999T", &mib), -EINVAL);
	assert_int_equal(mib, 7);
}

static void test_memory_from_model(void **state)
{
	(void)state;
	assert_int_equal(gpu_memory_from_model("NVIDIA H100 80GB HBM3"), 80 * 1024);
	assert_int_equal(gpu_memory_from_model("NVIDIA A100-SXM4-40GB"), 40 * 1024);
	assert_int_equal(gpu_memory_from_model("Tesla V100-SXM2-16GB"), 16 * 1024);
	assert_int_equal(gpu_memory_from_model("Tesla K80"), 0);
	assert_int_equal(gpu_memory_from_model("NVIDIA H100 NVL"), 0);
	assert_int_equal(gpu_memory_from_model("GB200"), 0);
	assert_int_equal(gpu_memory_from_model(NULL), 0);
}

/* ---- discovery on a tree made here (no mknod: runs unprivileged) ---- */

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[512], dir[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	assert_int_equal(mkdir_p(dir, 0755), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void add_gpu(const char *pci, const char *uuid, int minor, const char *device)
{
	char rel[256], text[512];

	snprintf(
		text, sizeof(text),
		"Model: \t\t NVIDIA Test\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %d\n",
		uuid, pci, minor);
	snprintf(rel, sizeof(rel), "proc/driver/nvidia/gpus/%s/information", pci);
	put(rel, text);
	snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s/vendor", pci);
	put(rel, "0x10de\n");
	snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s/device", pci);
	put(rel, device);
}

static int fixture_setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/devgate-unit.XXXXXX");
	assert_non_null(mkdtemp(root));
	put("proc/devices", "Character devices:\n195 nvidia\n508 nvidia-uvm\n");
	/* Out of PCI order on purpose: the index follows the bus id. */
	add_gpu("0000:86:00.0", "GPU-cccc0000-0000-0000-0000-000000000002", 2, "0x20b0\n");
	add_gpu("0000:18:00.0", "GPU-aaaa0000-0000-0000-0000-000000000000", 0, "0x2330\n");
	add_gpu("0000:3b:00.0", "GPU-aaab0000-0000-0000-0000-000000000001", 1, "0x2330\n");
	put("dev/nvidia2", "not a device\n");
	return 0;
}

static int fixture_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_discover(void **state)
{
	struct dg_inventory *inv = NULL;
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(inventory_discover(root, &inv, &err), 0);
	assert_int_equal(inv->n_gpus, 3);
	assert_string_equal(inv->gpus[0].pci, "0000:18:00.0");
	assert_int_equal(inv->gpus[0].index, 0);
	assert_string_equal(inv->gpus[0].arch, "hopper");
	assert_int_equal(inv->gpus[0].device, 0x2330);
	assert_string_equal(inv->gpus[2].arch, "ampere");
	assert_int_equal(inv->gpus[2].minor, 2);
	/* /dev/nvidia2 is a regular file: that GPU is refused, with the reason. */
	assert_string_equal(inv->gpus[0].problem, "");
	assert_non_null(strstr(inv->gpus[2].problem, "host node /dev/nvidia2 is not character "
						     "device 195:2"));
	assert_int_equal(inv->n_ctl, 3);
	assert_string_equal(inv->ctl[1].name, "nvidia-uvm");
	assert_int_equal(inv->ctl[1].major, 508);
	inventory_free(inv);
}

/*
 * A host laid out like NVIDIA's own container hosts: the libraries in a
 * directory only ld.so.conf names, /usr/bin/nvidia-smi a wrapper script.
 */
static void test_driver_layout(void **state)
{
	char drv[128];
	int fd;
	struct dg_driver *d = calloc(1, sizeof(*d));

	(void)state;
	assert_non_null(d);
	put("drv/proc/driver/nvidia/version",
	    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n");
	put("drv/etc/ld.so.conf", "# comment\ninclude /etc/ld.so.conf.d/*.conf\n");
	put("drv/etc/ld.so.conf.d/nvidia.conf", "/usr/local/nvidia/lib64\n/usr/local/nvidia/lib\n");
	put("drv/etc/ld.so.conf.d/skip.txt", "/nowhere\n");
	put("drv/usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04", "x");
	put("drv/usr/local/nvidia/lib64/libcuda.so.580.159.04", "x");
	put("drv/usr/bin/nvidia-smi", "#!/bin/sh\nexec /usr/local/nvidia/bin/nvidia-smi \"$@\"\n");
	put("drv/usr/local/nvidia/bin/nvidia-smi", "\177ELF-a program");
	put("drv/usr/bin/nvidia-debugdump", "#!/bin/sh\n");
	snprintf(drv, sizeof(drv), "%s/drv", root);
	fd = open(drv, O_PATH | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(driver_discover(fd, d), 0);
	close(fd);
	assert_string_equal(d->version, "580.159.04");
	assert_int_equal(d->n, 4);
	assert_string_equal(d->files[0].path, "/usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04");
	assert_string_equal(d->files[0].soname, "libnvidia-ml.so.1");
	assert_string_equal(d->files[1].path, "/usr/local/nvidia/lib64/libcuda.so.580.159.04");
	/* The program, not the script that runs it; a script when there is nothing else. */
	assert_string_equal(d->files[2].path, "/usr/local/nvidia/bin/nvidia-smi");
	assert_string_equal(d->files[3].path, "/usr/bin/nvidia-debugdump");
	free(d);
}

static void test_discover_no_driver(void **state)
{
	struct dg_inventory *inv = NULL;
	struct dg_error err = { 0 };
	char other[80];

	(void)state;
	snprintf(other, sizeof(other), "%s/empty", root);
	assert_int_equal(mkdir_p(other, 0755), 0);
	assert_int_not_equal(inventory_discover(other, &inv, &err), 0);
	assert_non_null(strstr(err.message, "proc/devices"));
	assert_int_equal(inventory_discover("/nonexistent/devgate", &inv, &err), -ENOENT);
	assert_int_equal(err.code, DG_E_INVALID);
}

static void test_kfd_render_minor(void **state)
{
	uint32_t m = 0;

	(void)state;
	assert_int_equal(kfd_render_minor_parse("cpu_cores_count 0\nsimd_count 416\n"
						"drm_render_minor 129\nhive_id 0\n",
						&m),
			 0);
	assert_int_equal(m, 129);
	/* A CPU node names minor 0; a node without the line names none. */
	assert_int_equal(kfd_render_minor_parse("drm_render_minor 0\n", &m), -ENOENT);
	assert_int_equal(kfd_render_minor_parse("simd_count 0\n", &m), -ENOENT);
	assert_int_equal(kfd_render_minor_parse("drm_render_minor x12\n", &m), -EINVAL);
	assert_int_equal(kfd_render_minor_parse("drm_render_minor \n", &m), -EINVAL);
}

static void test_proc_devices_kfd(void **state)
{
	struct dg_majors m;
	enum dg_vendor v;

	(void)state;
	proc_devices_parse("Character devices:\n226 drm\n507 kfd\n", &m);
	assert_true(m.has_kfd);
	assert_int_equal(m.kfd, 507);
	assert_false(m.has_nvidia);
	assert_int_equal(vendor_parse("AMD", &v), 0);
	assert_int_equal(v, DG_VENDOR_AMD);
	assert_string_equal(vendor_name(DG_VENDOR_INTEL), "intel");
	assert_int_equal(vendor_parse("matrox", &v), -EINVAL);
}

/* renderD<minor> (and its card) of a PCI device of vendor:device. */
static void add_drm(const char *name, unsigned int minor, const char *pci, const char *vendor,
		    const char *device)
{
	char rel[256], text[64], link[512];

	snprintf(rel, sizeof(rel), "drm/sys/bus/pci/devices/%s/vendor", pci);
	put(rel, vendor);
	snprintf(rel, sizeof(rel), "drm/sys/bus/pci/devices/%s/device", pci);
	put(rel, device);
	snprintf(rel, sizeof(rel), "drm/sys/class/drm/%s/dev", name);
	snprintf(text, sizeof(text), "226:%u\n", minor);
	put(rel, text);
	snprintf(link, sizeof(link), "%s/drm/sys/class/drm/%s/device", root, name);
	snprintf(rel, sizeof(rel), "../../../bus/pci/devices/%s", pci);
	assert_int_equal(symlink(rel, link), 0);
}

static void test_discover_drm(void **state)
{
	struct dg_inventory *inv = NULL;
	struct dg_error err = { 0 };
	struct dg_node node;
	char drm[96];

	(void)state;
	put("drm/proc/devices", "Character devices:\n226 drm\n507 kfd\n");
	add_drm("renderD128", 128, "0000:c1:00.0", "0x1002\n", "0x74a1\n");
	add_drm("card1", 1, "0000:c1:00.0", "0x1002\n", "0x74a1\n");
	add_drm("renderD129", 129, "0000:41:00.0", "0x1002\n", "0x7fff\n");
	add_drm("renderD130", 130, "0000:05:00.0", "0x8086\n", "0x56c0\n");
	/* Neither a virtual display nor NVIDIA's DRM node is a GPU of this path. */
	add_drm("renderD131", 131, "0000:00:02.0", "0x1af4\n", "0x1050\n");
	add_drm("card0", 0, "0000:00:02.0", "0x1af4\n", "0x1050\n");
	add_drm("renderD132", 132, "0000:07:00.0", "0x10de\n", "0x2330\n");
	put("drm/sys/bus/pci/devices/0000:c1:00.0/unique_id", "2d1c34a1e2f8b0c5\n");
	put("drm/sys/class/kfd/kfd/topology/nodes/0/properties", "drm_render_minor 0\n");
	put("drm/sys/class/kfd/kfd/topology/nodes/1/properties", "drm_render_minor 128\n");
	snprintf(drm, sizeof(drm), "%s/drm", root);
	assert_int_equal(inventory_discover(drm, &inv, &err), 0);
	assert_int_equal(inv->n_gpus, 3);
	/* PCI order: Intel 05, AMD 41, AMD c1. */
	assert_int_equal(inv->gpus[0].family, DG_VENDOR_INTEL);
	assert_string_equal(inv->gpus[0].uuid, "0000:05:00.0");
	assert_string_equal(inv->gpus[0].model, "Intel Data Center GPU Flex 170");
	assert_string_equal(inv->gpus[0].problem, "");
	assert_int_equal(inv->gpus[1].family, DG_VENDOR_AMD);
	assert_string_equal(inv->gpus[1].model, "AMD GPU");
	/* No KFD node names renderD129: ROCm cannot use it, so devgate does not grant it. */
	assert_non_null(strstr(inv->gpus[1].problem, "no KFD topology node"));
	assert_string_equal(inv->gpus[2].uuid, "AMD-2d1c34a1e2f8b0c5");
	assert_string_equal(inv->gpus[2].pci, "0000:c1:00.0");
	assert_int_equal(inv->gpus[2].minor, 128);
	assert_string_equal(inv->gpus[2].problem, "");
	gpu_node(inv, &inv->gpus[2], &node);
	assert_string_equal(node.name, "dri/renderD128");
	assert_int_equal(node.major, 226);
	assert_int_equal(inv->n_ctl, 1);
	assert_string_equal(inv->ctl[0].name, "kfd");
	assert_int_equal(inv->ctl_vendor[0], DG_VENDOR_AMD);
	/* card1 is the MI300X's (the same PCI device); the Intel GPU has none. */
	assert_true(inv->gpus[2].has_card);
	assert_int_equal(inv->gpus[2].card_minor, 1);
	assert_false(inv->gpus[0].has_card);
	/* Guarded: the kfd's every minor, the GPUs' DRM minors; not the display's. */
	assert_true(inventory_guards(inv, 507, 3));
	assert_true(inventory_guards(inv, 226, 128));
	assert_true(inventory_guards(inv, 226, 130));
	assert_true(inventory_guards(inv, 226, 1));
	assert_false(inventory_guards(inv, 226, 131));
	assert_false(inventory_guards(inv, 226, 0));
	assert_false(inventory_guards(inv, 1, 3));
	inventory_free(inv);
}

static void select_ok(const struct dg_inventory *inv, const char *spec, const char *want)
{
	bool sel[DG_MAX_GPUS];
	struct dg_error err = { 0 };
	char got[DG_MAX_GPUS + 1] = "";

	assert_int_equal(select_gpus(inv, spec, sel, &err), 0);
	for (size_t i = 0; i < inv->n_gpus; i++)
		got[i] = sel[i] ? '1' : '0';
	assert_string_equal(got, want);
}

static void select_fails(const struct dg_inventory *inv, const char *spec, enum dg_code code)
{
	bool sel[DG_MAX_GPUS];
	struct dg_error err = { 0 };

	assert_true(select_gpus(inv, spec, sel, &err) < 0);
	assert_int_equal(err.code, code);
}

static void test_select(void **state)
{
	struct dg_inventory *inv = NULL;
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(inventory_discover(root, &inv, &err), 0);
	select_ok(inv, "0", "100");
	select_ok(inv, "2,0", "101");
	select_ok(inv, "all", "111");
	select_ok(inv, "GPU-cccc", "001");
	select_ok(inv, "cccc0000", "001");
	select_ok(inv, "gpu-AAAB", "010");
	select_ok(inv, "GPU-aaaa0000-0000-0000-0000-000000000000", "100");
	select_ok(inv, "3b:00.0", "010");
	select_ok(inv, "00000000:86:00.0", "001");
	select_ok(inv, " 1 , 2 ", "011");
	select_fails(inv, "GPU-aaa", DG_E_NO_GPU); /* ambiguous */
	select_fails(inv, "3", DG_E_NO_GPU);
	select_fails(inv, "GPU-dddd", DG_E_NO_GPU);
	select_fails(inv, "0000:99:00.0", DG_E_NO_GPU);
	select_fails(inv, "", DG_E_INVALID);
	select_fails(inv, "0,", DG_E_INVALID);
	select_fails(inv, ",0", DG_E_INVALID);
	select_fails(inv, "0;1", DG_E_INVALID);
	select_fails(inv, "MIG-0000", DG_E_INVALID);
	select_fails(inv, "99999999999", DG_E_NO_GPU);
	inventory_free(inv);
}

static void test_mig_access_parse(void **state)
{
	uint32_t m = 0;

	(void)state;
	assert_int_equal(mig_access_parse("DeviceFileMinor: 21\nDeviceFileMode: 292\n"
					  "DeviceFileModify: 1\n",
					  &m),
			 0);
	assert_int_equal(m, 21);
	assert_int_equal(mig_access_parse("DeviceFileMode: 292\nDeviceFileMinor:\t7", &m), 0);
	assert_int_equal(m, 7);
	assert_int_equal(mig_access_parse("DeviceFileMode: 292\n", &m), -EINVAL);
	assert_int_equal(mig_access_parse("DeviceFileMinor: -1\n", &m), -EINVAL);
	assert_int_equal(mig_access_parse("DeviceFileMinor: 12x\n", &m), -EINVAL);
	assert_int_equal(mig_access_parse("DeviceFileMinor: \n", &m), -EINVAL);
	assert_int_equal(mig_access_parse("", &m), -EINVAL);
}

static void test_mig_selector(void **state)
{
	char sel[64];
	uint32_t gi = 99;

	(void)state;
	assert_int_equal(mig_selector_parse("0:1", sel, sizeof(sel), &gi), 0);
	assert_string_equal(sel, "0");
	assert_int_equal(gi, 1);
	assert_int_equal(mig_selector_parse("0000:18:00.0:2", sel, sizeof(sel), &gi), 0);
	assert_string_equal(sel, "0000:18:00.0");
	assert_int_equal(gi, 2);
	assert_int_equal(mig_selector_parse("GPU-aaaa:0", sel, sizeof(sel), &gi), 0);
	assert_string_equal(sel, "GPU-aaaa");
	assert_int_equal(gi, 0);
	/* Not instances: whole GPUs, PCI bus ids. */
	assert_int_equal(mig_selector_parse("0", sel, sizeof(sel), &gi), -ENOENT);
	assert_int_equal(mig_selector_parse("18:00.0", sel, sizeof(sel), &gi), -ENOENT);
	assert_int_equal(mig_selector_parse("0000:18:00.0", sel, sizeof(sel), &gi), -ENOENT);
	assert_int_equal(mig_selector_parse(":1", sel, sizeof(sel), &gi), -EINVAL);
	assert_int_equal(mig_selector_parse("0:", sel, sizeof(sel), &gi), -EINVAL);
	assert_int_equal(mig_selector_parse("0:x", sel, sizeof(sel), &gi), -EINVAL);
	assert_int_equal(mig_selector_parse("0:-1", sel, sizeof(sel), &gi), -EINVAL);
	assert_int_equal(mig_selector_parse("0:99999999999", sel, sizeof(sel), &gi), -EINVAL);
}

static void test_discover_mig(void **state)
{
	static const char caps[] = "mig/proc/driver/nvidia/capabilities/gpu3/mig";
	struct dg_inventory *inv = NULL;
	struct dg_error err = { 0 };
	char rel[160], dir[160];

	(void)state;
	put("mig/proc/devices", "Character devices:\n195 nvidia\n506 nvidia-caps\n");
	put("mig/proc/driver/nvidia/gpus/0000:18:00.0/information",
	    "GPU UUID: \t GPU-aaaa0000-0000-0000-0000-000000000000\n"
	    "Bus Location: \t 0000:18:00.0\nDevice Minor: \t 3\n");
	put("mig/proc/driver/nvidia/gpus/0000:3b:00.0/information",
	    "GPU UUID: \t GPU-aaab0000-0000-0000-0000-000000000001\n"
	    "Bus Location: \t 0000:3b:00.0\nDevice Minor: \t 4\n");
	/* Out of order, a CI without its access file, a stray name: sorted, skipped. */
	snprintf(rel, sizeof(rel), "%s/gi2/access", caps);
	put(rel, "DeviceFileMinor: 426\nDeviceFileMode: 292\n");
	snprintf(rel, sizeof(rel), "%s/gi1/ci1/access", caps);
	put(rel, "DeviceFileMinor: 419\n");
	snprintf(rel, sizeof(rel), "%s/gi1/ci0/access", caps);
	put(rel, "DeviceFileMinor: 418\n");
	snprintf(rel, sizeof(rel), "%s/gi1/access", caps);
	put(rel, "DeviceFileMinor: 417\n");
	snprintf(dir, sizeof(dir), "%s/%s/gi1/ci5", root, caps);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	snprintf(rel, sizeof(rel), "%s/gix/access", caps);
	put(rel, "DeviceFileMinor: 1\n");
	snprintf(dir, sizeof(dir), "%s/mig", root);
	assert_int_equal(inventory_discover(dir, &inv, &err), 0);
	assert_true(inv->majors.has_caps);
	assert_int_equal(inv->majors.caps, 506);
	assert_true(inventory_guards(inv, 506, 417));
	assert_int_equal(inv->n_gpus, 2);
	assert_true(inv->gpus[0].mig);
	assert_int_equal(inv->gpus[0].n_gi, 2);
	assert_int_equal(inv->gpus[0].gi[0].id, 1);
	assert_int_equal(inv->gpus[0].gi[0].minor, 417);
	assert_int_equal(inv->gpus[0].gi[0].n_ci, 2);
	assert_int_equal(inv->gpus[0].gi[0].ci[0].minor, 418);
	assert_int_equal(inv->gpus[0].gi[0].ci[1].id, 1);
	assert_int_equal(inv->gpus[0].gi[1].id, 2);
	assert_int_equal(inv->gpus[0].gi[1].n_ci, 0);
	assert_non_null(mig_find_gi(&inv->gpus[0], 2));
	assert_null(mig_find_gi(&inv->gpus[0], 3));
	/* No capabilities directory: not in MIG mode. */
	assert_false(inv->gpus[1].mig);
	assert_int_equal(inv->gpus[1].n_gi, 0);
	inventory_free(inv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_devices_new_driver),
		cmocka_unit_test(test_proc_devices_old_driver_no_uvm),
		cmocka_unit_test(test_proc_devices_block_only),
		cmocka_unit_test(test_info_parse),
		cmocka_unit_test(test_info_parse_rejects),
		cmocka_unit_test(test_pci_normalize),
		cmocka_unit_test(test_arch),
		cmocka_unit_test(test_arch_families),
		cmocka_unit_test(test_arch_names),
		cmocka_unit_test(test_cc_parse),
		cmocka_unit_test(test_size_parse),
		cmocka_unit_test(test_memory_from_model),
		cmocka_unit_test(test_discover),
		cmocka_unit_test(test_discover_no_driver),
		cmocka_unit_test(test_select),
		cmocka_unit_test(test_kfd_render_minor),
		cmocka_unit_test(test_proc_devices_kfd),
		cmocka_unit_test(test_discover_drm),
		cmocka_unit_test(test_mig_access_parse),
		cmocka_unit_test(test_mig_selector),
		cmocka_unit_test(test_discover_mig),
		cmocka_unit_test(test_driver_layout),
	};

	return cmocka_run_group_tests_name("gpu", tests, fixture_setup, fixture_teardown);
}
