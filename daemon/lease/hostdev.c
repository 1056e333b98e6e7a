// SPDX-License-Identifier: Apache-2.0
/*
 * Host devices granted by path (grant --device): turns "HOST[:PATH]" into
 * a lease device, refusing GPU nodes, and every device outside the few that
 * are safe in any container (and every disk) that the admin's device-allow
 * does not name. It only looks at the host: stat() of the host node and of
 * device-allow's paths, and a read of /proc/devices. It makes no node,
 * changes no lease and touches no cgroup or namespace; grant/request.c does
 * that with what it returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "devgate.h"
#include "cleanup.h"
#include "hostdev.h"
#include "util.h"

#define ANY_MINOR (-1)

/*
 * The character devices any container may be given without the admin's
 * word: the OCI runtime spec's default devices (each runtime makes them in
 * every container's /dev, and their drivers act only for the opener: the
 * null sinks and sources, the random pools, the opener's own terminal, a
 * new pseudo-terminal in the container's own devpts), FUSE (a file system
 * the container itself serves) and TUN (an interface in the container's own
 * network namespace). All have majors the kernel fixes (devices.txt: 1 mem,
 * 5 tty, 10 misc) and fixed minors, so the numbers alone decide; no driver
 * can take these numbers at load time. Every other character device needs
 * device-allow, whatever its path.
 */
struct safe_dev {
	uint32_t major, minor;
	const char *node;
};

static const struct safe_dev safe_devs[] = {
	{ 1, 3, "/dev/null" },	 { 1, 5, "/dev/zero" },	      { 1, 7, "/dev/full" },
	{ 1, 8, "/dev/random" }, { 1, 9, "/dev/urandom" },    { 5, 0, "/dev/tty" },
	{ 5, 2, "/dev/ptmx" },	 { 10, 200, "/dev/net/tun" }, { 10, 229, "/dev/fuse" },
};

/*
 * Devices that reach past a container, named in a refusal. Majors are the
 * fixed ones of the kernel's devices.txt; names are /proc/devices's, for
 * drivers that take a major at load time (and for the fixed ones, in case
 * a kernel moves them). A device on neither list is refused all the same;
 * this list only says why.
 */
struct breakout {
	uint32_t major; /* 0: by name only */
	const char *name;
	int64_t minor;
	const char *what;
};

static const struct breakout breakouts[] = {
	{ 1, "mem", 1, "the host's physical memory (/dev/mem)" },
	{ 1, "mem", 2, "the kernel's memory (/dev/kmem)" },
	{ 1, "mem", 4, "the host's I/O ports (/dev/port)" },
	{ 1, "mem", 11, "the host kernel's log, to read and to write (/dev/kmsg)" },
	{ 4, "tty", ANY_MINOR,
	  "a virtual console or serial line of the host (/dev/tty0, /dev/ttyN, /dev/ttyS*)" },
	{ 5, "/dev/console", 1, "the host's system console (/dev/console)" },
	{ 7, "vcs", ANY_MINOR, "the screen contents of the host's consoles (/dev/vcs*)" },
	{ 10, "misc", 130,
	  "the host's watchdog: a holder that stops feeding it reboots the host (/dev/watchdog)" },
	{ 10, "misc", 196, "VFIO, direct access to host devices (/dev/vfio/vfio)" },
	{ 10, "misc", 223, "input typed and clicked into the host's session (/dev/uinput)" },
	{ 10, "misc", 224, "the host's TPM (/dev/tpm0)" },
	{ 10, "misc", 231, "the hibernation image of host memory (/dev/snapshot)" },
	{ 10, "misc", 234, "btrfs control (/dev/btrfs-control)" },
	{ 10, "misc", 236, "device-mapper control (/dev/mapper/control)" },
	{ 10, "misc", 237, "loop control: it attaches host files as disks (/dev/loop-control)" },
	{ 13, "input", ANY_MINOR, "the host's keyboards, mice and other input (/dev/input/*)" },
	{ 21, "sg", ANY_MINOR, "raw SCSI commands to a host disk (/dev/sg*)" },
	{ 90, "mtd", ANY_MINOR, "raw flash memory (/dev/mtd*)" },
	{ 180, "usb", ANY_MINOR, "a USB device of the host (/dev/usb/*)" },
	{ 189, "usb_device", ANY_MINOR, "a USB device of the host (/dev/bus/usb/*)" },
	{ 202, "cpu/msr", ANY_MINOR, "CPU model-specific registers (/dev/cpu/*/msr)" },
	{ 0, "bsg", ANY_MINOR, "raw block commands to a host disk (/dev/bsg/*)" },
	{ 0, "nvme", ANY_MINOR, "an NVMe controller of the host (/dev/nvme*)" },
	{ 0, "nvme-generic", ANY_MINOR, "raw NVMe commands to a host disk (/dev/ng*)" },
	{ 0, "watchdog", ANY_MINOR, "a watchdog of the host (/dev/watchdog*)" },
	{ 0, "tpm", ANY_MINOR, "the host's TPM (/dev/tpm*)" },
	{ 0, "tpmrm", ANY_MINOR, "the host's TPM (/dev/tpmrm*)" },
	{ 0, "ipmidev", ANY_MINOR, "the host's management controller (/dev/ipmi*)" },
	{ 0, "vfio", ANY_MINOR, "a VFIO group, direct access to a host device (/dev/vfio/*)" },
	{ 0, "vfio-dev", ANY_MINOR,
	  "a VFIO device, direct access to a host device (/dev/vfio/devices/*)" },
	{ 0, "hidraw", ANY_MINOR,
	  "raw access to the host's keyboards and other HID devices (/dev/hidraw*)" },
	{ 0, "dax", ANY_MINOR, "the host's persistent memory (/dev/dax*)" },
	{ 0, "usbmon", ANY_MINOR, "every packet on the host's USB buses (/dev/usbmon*)" },
};

/*
 * Returns whether the "Character devices:" part of /proc/devices gives
 * major the driver name name (a major may have several: 5 is /dev/tty,
 * /dev/console and /dev/ptmx). Writes in first, when given, the first name
 * it has; "" when none.
 */
static bool major_named(const char *proc_devices, uint32_t major, const char *name, char *first,
			size_t len)
{
	const char *p = proc_devices ? strstr(proc_devices, "Character devices:") : NULL;
	const char *end = p ? strstr(p, "Block devices:") : NULL;

	if (first)
		first[0] = '\0';
	for (p = p ? strchr(p, '\n') : NULL; p && (!end || p < end); p = strchr(p + 1, '\n')) {
		unsigned int m;
		char n[64];

		if (sscanf(p + 1, "%u %63s", &m, n) != 2 || m != major)
			continue;
		if (first && !first[0])
			snprintf(first, len, "%s", n);
		if (name && strcmp(n, name) == 0)
			return true;
	}
	return false;
}

const char *hostdev_safe(dev_t rdev)
{
	for (size_t i = 0; i < ARRAY_SIZE(safe_devs); i++) {
		if (safe_devs[i].major == major(rdev) && safe_devs[i].minor == minor(rdev))
			return safe_devs[i].node;
	}
	return NULL;
}

const char *hostdev_breakout(dev_t rdev, const char *proc_devices)
{
	uint32_t maj = major(rdev), min = minor(rdev);

	for (size_t i = 0; i < ARRAY_SIZE(breakouts); i++) {
		const struct breakout *b = &breakouts[i];
		bool by_major = b->major && b->major == maj;
		bool by_name = major_named(proc_devices, maj, b->name, NULL, 0);

		if ((by_major || by_name) && (b->minor == ANY_MINOR || b->minor == min))
			return b->what;
	}
	return NULL;
}

/* Writes the safe devices' usual paths, ", " apart. */
static void safe_text(char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(safe_devs) && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", safe_devs[i].node);

		off += w > 0 ? (size_t)w : 0;
	}
}

/* Sets err for item, a device-allow entry that is not one, and returns -EINVAL. */
static int bad_allow(const char *item, struct dg_error *err)
{
	dg_error_set(err, DG_E_INVALID, EINVAL,
		     "'%s' is not a device: give an absolute host path, MAJOR:MINOR or MAJOR:* "
		     "(b:MAJOR:MINOR or b:MAJOR:* for a block device)",
		     item);
	return -EINVAL;
}

/*
 * Parses one device-allow entry into e: an absolute path, MAJOR:MINOR or
 * MAJOR:*, with "b:" before the numbers of a block device. Returns 0 or
 * -EINVAL with err set.
 */
static int allow_entry(const char *item, struct hostdev_allow_entry *e, struct dg_error *err)
{
	const char *m;
	char *end;
	unsigned long maj, min;

	*e = (struct hostdev_allow_entry){ .minor = ANY_MINOR };
	if (strncmp(item, "b:", 2) == 0) {
		e->block = true;
		item += 2;
	}
	if (item[0] == '/' && !e->block) {
		if (strlen(item) >= sizeof(e->path))
			return bad_allow(item, err);
		snprintf(e->path, sizeof(e->path), "%s", item);
		return 0;
	}
	errno = 0;
	maj = strtoul(item, &end, 10);
	if (end == item || *end != ':' || errno || maj > 4095 || item[0] == '-')
		return bad_allow(item - (e->block ? 2 : 0), err);
	e->major = (uint32_t)maj;
	if (strcmp(end + 1, "*") == 0)
		return 0;
	m = end + 1;
	min = strtoul(m, &end, 10);
	if (end == m || *end || errno || min > 0xfffff || m[0] == '-')
		return bad_allow(item - (e->block ? 2 : 0), err);
	e->minor = (int64_t)min;
	return 0;
}

int hostdev_set_allow(struct hostdev_allow *a, const char *value, struct dg_error *err)
{
	struct hostdev_allow next = { .n = 0 };
	char buf[4096], *save = NULL;

	if (strlen(value) >= sizeof(buf))
		return dg_error_set(err, DG_E_INVALID, E2BIG, "the list is too long");
	snprintf(buf, sizeof(buf), "%s", value);
	for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		if (next.n == HOSTDEV_MAX_ALLOW)
			return dg_error_set(err, DG_E_INVALID, E2BIG, "at most %d devices",
					    HOSTDEV_MAX_ALLOW);
		if (allow_entry(t, &next.e[next.n++], err) < 0)
			return -EINVAL;
	}
	*a = next;
	return 0;
}

void hostdev_allow_text(const struct hostdev_allow *a, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < a->n && off < len; i++) {
		const struct hostdev_allow_entry *e = &a->e[i];
		const char *sep = i ? ", " : "", *b = e->block ? "b:" : "";
		int w;

		if (e->path[0])
			w = snprintf(buf + off, len - off, "%s%s", sep, e->path);
		else if (e->minor == ANY_MINOR)
			w = snprintf(buf + off, len - off, "%s%s%u:*", sep, b, e->major);
		else
			w = snprintf(buf + off, len - off, "%s%s%u:%" PRId64, sep, b, e->major,
				     e->minor);
		off += w > 0 ? (size_t)w : 0;
	}
}

/*
 * Returns whether device-allow names rdev, a block or char device. A path
 * entry names the node it leads to now (stat), so a symlink or a moved node
 * still matches; numbers are a char device's unless written b:MAJ:MIN.
 */
static bool allowed(const struct hostdev_allow *a, dev_t rdev, bool block)
{
	mode_t type = block ? S_IFBLK : S_IFCHR;

	for (size_t i = 0; i < a->n; i++) {
		const struct hostdev_allow_entry *e = &a->e[i];
		struct stat st;

		if (e->path[0]) {
			if (stat(e->path, &st) == 0 && (st.st_mode & S_IFMT) == type &&
			    st.st_rdev == rdev)
				return true;
		} else if (e->block == block && e->major == major(rdev) &&
			   (e->minor == ANY_MINOR || e->minor == (int64_t)minor(rdev))) {
			return true;
		}
	}
	return false;
}

int hostdev_access_parse(const char *s, uint32_t *ret, struct dg_error *err)
{
	if (lease_access_parse(s, ret) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "access '%s' is not a set of r, w and m",
			     s);
		dg_error_hint(err,
			      "e.g. --access r (read only), rw (the default) or rwm (and mknod)");
		return -EINVAL;
	}
	return 0;
}

/* Sets err for path, a container path that is not one, and returns -EINVAL. */
static int bad_path(const char *path, const char *why, struct dg_error *err)
{
	dg_error_set(err, DG_E_INVALID, EINVAL, "container path '%s' %s", path, why);
	dg_error_hint(err, "give a node directly under /dev: --device HOST:/dev/NAME");
	return -EINVAL;
}

/*
 * Copies NAME of the container path /dev/NAME into name. Returns 0, or
 * -EINVAL with err set when NAME is not one component (mknodat on "a/b"
 * would follow a directory the container owns), too long, or a GPU node's.
 */
static int container_name(const char *path, char *name, size_t len, struct dg_error *err)
{
	const char *n = path + 5;

	if (strncmp(path, "/dev/", 5) != 0)
		return bad_path(path, "is not under /dev", err);
	if (!*n || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
		return bad_path(path, "is not /dev/NAME with a single name", err);
	if (strlen(n) >= len)
		return bad_path(path, "has a name that is too long", err);
	if (strncmp(n, "nvidia", 6) == 0 || strcmp(n, "kfd") == 0)
		return bad_path(path, "is a GPU node's name", err);
	snprintf(name, len, "%s", n);
	return 0;
}

/*
 * Fills st from the host node host, following symlinks. Returns 0, or a
 * negative errno with err set when it is missing or not a device node.
 */
static int host_node(const char *host, struct stat *st, struct dg_error *err)
{
	int r;

	/* A host path, named by an admin: devgated's own view of the host. */
	if (stat(host, st) < 0) {
		r = -errno;
		dg_error_set(err, DG_E_INVALID, -r, "device '%s': %s", host, strerror(-r));
		dg_error_hint(err, "name a character device node on the host, e.g. /dev/full");
		return r;
	}
	if (!S_ISCHR(st->st_mode) && !S_ISBLK(st->st_mode)) {
		dg_error_set(err, DG_E_INVALID, ENODEV, "'%s' is not a device node", host);
		dg_error_hint(err, "name a character device node on the host, e.g. /dev/full");
		return -ENODEV;
	}
	return 0;
}

/*
 * Returns 0 when device-allow names the block device rdev, else -EPERM with
 * err set: a disk reaches the host's data.
 */
static int check_block(const char *host, dev_t rdev, const struct hostdev_allow *allow,
		       struct dg_error *err)
{
	if (allowed(allow, rdev, true))
		return 0;
	dg_error_set(err, DG_E_PERM, EPERM,
		     "device '%s' (b %u:%u) is a block device: devgate grants disks only where "
		     "the admin allows them",
		     host, major(rdev), minor(rdev));
	dg_error_hint(err, "the admin names it in devgate.conf: device-allow = %s (or b:%u:%u)",
		      host, major(rdev), minor(rdev));
	return -EPERM;
}

/*
 * Sets err for host, the character device rdev that device-allow does not
 * name and that is not safe for any container, and returns -EPERM. The
 * message says what it is where devgate knows; otherwise its driver's name.
 */
static int refuse_char(const char *host, dev_t rdev, struct dg_error *err)
{
	auto_free char *proc_devices = NULL;
	const char *what;
	char driver[64], safe[256];

	(void)read_file_at(AT_FDCWD, "/proc/devices", 1 << 16, &proc_devices, NULL);
	what = hostdev_breakout(rdev, proc_devices);
	(void)major_named(proc_devices, major(rdev), NULL, driver, sizeof(driver));
	if (what)
		dg_error_set(err, DG_E_PERM, EPERM,
			     "device '%s' (%u:%u) is %s: a container holding it reaches past "
			     "its walls",
			     host, major(rdev), minor(rdev), what);
	else
		dg_error_set(err, DG_E_PERM, EPERM,
			     "device '%s' (%u:%u, driver '%s') is not one that devgate hands to a "
			     "container unless the admin allows it",
			     host, major(rdev), minor(rdev), driver[0] ? driver : "unknown");
	safe_text(safe, sizeof(safe));
	dg_error_hint(err,
		      "if this container must have it, the admin names it in devgate.conf: "
		      "device-allow = %s (or %u:%u); without it devgate grants only %s",
		      host, major(rdev), minor(rdev), safe);
	return -EPERM;
}

/*
 * Returns 0 when the node st may be granted, else an error with err set: a
 * GPU-class node (devgate's own, never), or a block device or a character
 * device outside the safe classes which the admin did not allow.
 */
static int check_kind(const char *host, const struct stat *st, const struct dg_inventory *inv,
		      const struct hostdev_allow *allow, struct dg_error *err)
{
	dev_t rdev = st->st_rdev;
	uint32_t maj = major(rdev);

	if (S_ISBLK(st->st_mode))
		return check_block(host, rdev, allow, err);
	if (inventory_guards(inv, maj, minor(rdev))) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "device '%s' (%u:%u) is a GPU-class device devgate manages", host, maj,
			     minor(rdev));
		dg_error_hint(err, "grant GPUs with --gpu");
		return -EINVAL;
	}
	if (hostdev_safe(rdev) || allowed(allow, rdev, false))
		return 0;
	return refuse_char(host, rdev, err);
}

int hostdev_parse(const char *spec, const struct dg_inventory *inv,
		  const struct hostdev_allow *allow, uint32_t access, struct lease_device *ret,
		  struct dg_error *err)
{
	struct lease_device dev = { .access = access };
	const char *sep = NULL, *path;
	size_t host_len;
	struct stat st;
	int r;

	for (const char *p = strchr(spec, ':'); p; p = strchr(p + 1, ':')) {
		if (p[1] == '/')
			sep = p;
	}
	host_len = sep ? (size_t)(sep - spec) : strlen(spec);
	path = sep ? sep + 1 : spec;
	if (host_len == 0 || spec[0] != '/')
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "device '%s': the host path must be absolute", spec);
	if (host_len >= sizeof(dev.host))
		return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG,
				    "device '%s': the host path is too long", spec);
	memcpy(dev.host, spec, host_len);
	r = container_name(path, dev.name, sizeof(dev.name), err);
	if (r == 0)
		r = host_node(dev.host, &st, err);
	if (r == 0)
		r = check_kind(dev.host, &st, inv, allow, err);
	if (r < 0)
		return r;
	dev.block = S_ISBLK(st.st_mode);
	dev.major = major(st.st_rdev);
	dev.minor = minor(st.st_rdev);
	*ret = dev;
	return 0;
}
