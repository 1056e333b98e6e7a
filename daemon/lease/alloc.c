// SPDX-License-Identifier: Apache-2.0
/*
 * Which GPUs a grant request gets: checks the request, finds the GPUs that
 * match and are free, and picks among them by NUMA node, all or nothing.
 * Pure decisions over the inventory and the lease table's counts: nothing
 * here changes a lease or the table, makes a system call or logs. The
 * caller (grant/request.c) turns the GPUs picked into a lease.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "gpu_arch.h"
#include "numa.h"
#include "select.h"

/*
 * Returns self's hold of the whole GPU uuid; NULL when self is NULL, does not
 * hold the GPU, or holds only a MIG instance of it.
 */
static const struct lease_gpu *whole(const struct lease *self, const char *uuid)
{
	const struct lease_gpu *g = self ? lease_find_gpu(self, uuid) : NULL;

	return g && !g->instance ? g : NULL;
}

/*
 * Returns a lease that holds a MIG instance of GPU uuid, self first, or NULL.
 * An instance held by anyone takes the whole GPU out of reach.
 */
static const struct lease *instance_holder(const struct lease_table *t, const struct lease *self,
					   const char *uuid)
{
	uint32_t gi;

	if (self && lease_find_gpu(self, uuid) && !whole(self, uuid))
		return self;
	return lease_table_instance_holder(t, uuid, self ? self->cgid : 0, &gi);
}

/*
 * From the table's counts, less what self holds: O(GPUs), not O(leases). A
 * lease whose GPU the driver renumbered still counts, by UUID.
 */
void alloc_usage(const struct dg_inventory *inv, const struct lease_table *t, uint64_t self_cgid,
		 struct gpu_use *use)
{
	const struct lease *self = lease_table_find(t, self_cgid);

	memset(use, 0, inv->n_gpus * sizeof(*use));
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct lease_use *u = lease_table_use(t, inv->gpus[i].uuid);
		const struct lease_gpu *mine;
		uint32_t exclusive, shared;

		if (inv->gpus[i].mig)
			use[i].exclusive = instance_holder(t, self, inv->gpus[i].uuid);
		if (!u || use[i].exclusive)
			continue;
		mine = whole(self, u->uuid);
		exclusive = u->n_exclusive - (mine && !mine->shared);
		shared = u->n_shared - (mine && mine->shared);
		use[i].shared = shared;
		if (exclusive)
			use[i].exclusive = lease_table_holder(t, u, false, self_cgid);
		if (shared)
			use[i].shared_by = lease_table_holder(t, u, true, self_cgid);
	}
}

/* Parses "VVVV:DDDD", a PCI vendor and device in hex. Returns 0 or -EINVAL. */
static int parse_product(const char *s, unsigned int *vendor, unsigned int *device)
{
	char tail;

	if (!s || strlen(s) != 9 || s[4] != ':')
		return -EINVAL;
	if (sscanf(s, "%4x:%4x%c", vendor, device, &tail) != 2)
		return -EINVAL;
	return 0;
}

/* Returns whether req asks for a count or a kind of GPU, anything but selectors. */
static bool has_constraints(const struct alloc_request *req)
{
	return req->count || req->model || req->arch || req->vendor || req->product ||
	       req->min_memory || req->min_cc || req->same_numa;
}

/*
 * Checks the constraints that name a kind of GPU: vendor, architecture,
 * memory, compute capability. Returns 0, or -EINVAL with err naming the
 * one that is wrong and what is known.
 */
static int check_kind(const struct alloc_request *req, struct dg_error *err)
{
	uint64_t mib;
	unsigned int cc;
	enum dg_vendor v = DG_VENDOR_NVIDIA;

	if (req->vendor && vendor_parse(req->vendor, &v) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "unknown vendor '%s'", req->vendor);
		dg_error_hint(err, "known (any case): nvidia amd intel");
		return -EINVAL;
	}
	if (req->arch && v != DG_VENDOR_NVIDIA) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "--arch names NVIDIA architectures; %s GPUs have none devgate knows",
			     vendor_name(v));
		dg_error_hint(err, "select %s GPUs by --model or --product", vendor_name(v));
		return -EINVAL;
	}
	if (req->arch && !gpu_arch_canonical(req->arch)) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "unknown architecture '%s'", req->arch);
		dg_error_hint(err, "known (any case): " GPU_ARCH_NAMES);
		return -EINVAL;
	}
	if (req->min_memory && gpu_size_parse(req->min_memory, &mib) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "memory size '%s' is not a size",
			     req->min_memory);
		dg_error_hint(err, "a number and a binary unit: 40G, 16GiB, 512M");
		return -EINVAL;
	}
	if (req->min_cc && gpu_cc_parse(req->min_cc, &cc) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "compute capability '%s' is not MAJOR.MINOR", req->min_cc);
		dg_error_hint(err, "e.g. 8.0 (A100), 9.0 (H100), 7.0 (V100)");
		return -EINVAL;
	}
	return 0;
}

int alloc_check_request(const struct alloc_request *req, struct dg_error *err)
{
	unsigned int v, d;

	if (req->selectors && req->same_numa) {
		dg_error_set(err, DG_E_INVALID, EINVAL,
			     "--same-numa goes with a count of GPUs, not with GPU selectors");
		dg_error_hint(err,
			      "ask for --gpus N --same-numa; selected GPUs are taken as named");
		return -EINVAL;
	}
	if (req->selectors && has_constraints(req))
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "give either GPU selectors or a count "
				    "with constraints, not both");
	if (!req->selectors && req->count == 0)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "no GPU requested: give selectors or "
				    "a count of at least 1");
	if (req->count > DG_MAX_GPUS)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "a count of %u GPUs is more than "
				    "devgate manages (%d)",
				    req->count, DG_MAX_GPUS);
	if (req->product && parse_product(req->product, &v, &d) < 0)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "product '%s' is not VENDOR:DEVICE in "
				    "hex, e.g. 10de:2330",
				    req->product);
	if (req->model && !*req->model)
		return dg_error_set(err, DG_E_INVALID, EINVAL, "empty model constraint");
	return check_kind(req, err);
}

/*
 * Returns whether gpu has the memory and compute capability req asks for at
 * least. What the driver did not say never meets a minimum.
 */
static bool meets_minimums(const struct dg_gpu *gpu, const struct alloc_request *req)
{
	uint64_t mib = 0;
	unsigned int cc = 0;

	if (req->min_memory && (gpu_size_parse(req->min_memory, &mib) < 0 || gpu->memory_mib < mib))
		return false;
	if (req->min_cc && (gpu_cc_parse(req->min_cc, &cc) < 0 || gpu->cc < cc))
		return false;
	return true;
}

/* Returns whether gpu is of the kind req asks for: model, vendor, arch, product, minimums. */
static bool matches(const struct dg_gpu *gpu, const struct alloc_request *req)
{
	unsigned int v, d;

	enum dg_vendor want;

	if (req->model && !strcasestr(gpu->model, req->model))
		return false;
	if (req->vendor && (vendor_parse(req->vendor, &want) < 0 || gpu->family != want))
		return false;
	if (req->arch && strcmp(gpu->arch, gpu_arch_canonical(req->arch)) != 0)
		return false;
	if (req->product &&
	    (parse_product(req->product, &v, &d) < 0 || gpu->vendor != v || gpu->device != d))
		return false;
	return meets_minimums(gpu, req);
}

/* Returns whether s looks like a runtime's container id: 32 or more hex digits. */
static bool long_hex_id(const char *s)
{
	size_t n = 0;

	for (; *s; s++, n++) {
		if (!isxdigit((unsigned char)*s))
			return false;
	}
	return n >= 32;
}

void holder_text(const struct lease *l, char *buf, size_t len)
{
	const char *label = lease_label(l);

	if (long_hex_id(label))
		snprintf(buf, len, "container %.12s…", label);
	else
		snprintf(buf, len, "container %s", label);
}

/*
 * Returns why gpu cannot go to the request, written in buf: excluded by the
 * admin, broken, held, or shared when the request is exclusive. Returns
 * NULL when it can.
 */
static const char *blocker(const struct dg_gpu *gpu, const struct gpu_use *u, bool shared,
			   char *buf, size_t len)
{
	char who[64];

	if (gpu->excluded) {
		snprintf(buf, len, "GPU %u (%04x:%04x) is excluded by the admin's gpu-allow list",
			 gpu->index, gpu->vendor, gpu->device);
		return buf;
	}
	if (gpu->problem[0]) {
		snprintf(buf, len, "GPU %u unusable: %s", gpu->index, gpu->problem);
		return buf;
	}
	if (u->exclusive) {
		holder_text(u->exclusive, who, sizeof(who));
		snprintf(buf, len, "GPU %u held by %s", gpu->index, who);
		return buf;
	}
	if (!shared && u->shared) {
		holder_text(u->shared_by, who, sizeof(who));
		snprintf(buf, len, "GPU %u shared by %s%s", gpu->index, who,
			 u->shared > 1 ? " and others" : "");
		return buf;
	}
	return NULL;
}

/*
 * Marks in picked the GPUs the selectors name that self does not hold yet.
 * Returns 0, or an error with err set when a selector names no GPU, a GPU
 * is not free, or self holds it the other way (shared or exclusively).
 */
static int pick_selected(const struct dg_inventory *inv, const struct gpu_use *use,
			 const struct lease *self, const struct alloc_request *req, bool *picked,
			 struct dg_error *err)
{
	bool sel[DG_MAX_GPUS];
	char why[512];
	int r = select_gpus(inv, req->selectors, sel, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &inv->gpus[i];
		const struct lease_gpu *mine = whole(self, gpu->uuid);

		if (!sel[i])
			continue;
		if (mine) {
			if (mine->shared != req->shared)
				return dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
						    "the container already holds GPU %u %s; revoke "
						    "it first to take it %s",
						    gpu->index,
						    mine->shared ? "shared" : "exclusively",
						    req->shared ? "shared" : "exclusively");
			continue; /* granting twice is one grant */
		}
		if (blocker(gpu, &use[i], req->shared, why, sizeof(why))) {
			dg_error_set(err, DG_E_UNAVAILABLE, EBUSY, "%s", why);
			dg_error_hint(err,
				      gpu->excluded
					      ? "gpu-allow in devgate.conf lists the GPUs "
						"devgate may grant; ask the admin"
					      : "run 'devgatectl list --free' to see free GPUs");
			return -EBUSY;
		}
		picked[i] = true;
	}
	return 0;
}

/* Writes req's constraints for messages, " arch=ampere min-memory=40G"; "" when none. */
static void constraint_text(const struct alloc_request *req, char *buf, size_t len)
{
	int n = 0;

	buf[0] = '\0';
	if (req->arch)
		n += snprintf(buf + n, len - (size_t)n, " arch=%s", req->arch);
	if (req->vendor && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " vendor=%s", req->vendor);
	if (req->model && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " model=%s", req->model);
	if (req->product && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " product=%s", req->product);
	if (req->min_memory && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " min-memory=%s", req->min_memory);
	if (req->min_cc && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " min-cc=%s", req->min_cc);
}

/* How the GPUs a counted request may take sit on NUMA nodes; slot DG_MAX_NUMA: no known node. */
struct topo_counts {
	unsigned int free[DG_MAX_NUMA + 1];	/* may be taken */
	unsigned int matching[DG_MAX_NUMA + 1]; /* usable, match: free or not, self's too */
	unsigned int first[DG_MAX_NUMA + 1];	/* lowest index that may be taken */
	int held_node; /* node of self's matching GPUs: -1 none, -2 mixed */
	bool known;    /* some matching GPU has a known node */
};

/* Returns gpu's NUMA node, or DG_MAX_NUMA when it is not known. */
static unsigned int node_slot(const struct dg_gpu *gpu)
{
	return gpu->numa_known ? (unsigned int)gpu->numa_node : DG_MAX_NUMA;
}

/*
 * Counts, per NUMA node, the usable GPUs that match req, those of them elig
 * marks as free to take, and where self's matching GPUs are.
 */
static void topo_count(const struct dg_inventory *inv, const struct lease *self,
		       const struct alloc_request *req, const bool *elig, struct topo_counts *c)
{
	memset(c, 0, sizeof(*c));
	c->held_node = -1;
	for (size_t i = inv->n_gpus; i-- > 0;) {
		const struct dg_gpu *gpu = &inv->gpus[i];
		unsigned int slot = node_slot(gpu);

		/* Excluded or broken GPUs will never count toward --same-numa. */
		if (!matches(gpu, req) || gpu->excluded || gpu->problem[0])
			continue;
		c->matching[slot]++;
		c->known |= gpu->numa_known;
		if (elig[i]) {
			c->free[slot]++;
			c->first[slot] = gpu->index;
		}
		if (whole(self, gpu->uuid)) {
			int n = slot < DG_MAX_NUMA ? (int)slot : -2;

			c->held_node = c->held_node == -1 || c->held_node == n ? n : -2;
		}
	}
}

/*
 * Returns whether node n has more room than node best (-1: none yet): more
 * free GPUs, or as many with a lower first free index.
 */
static bool roomier(const struct topo_counts *c, unsigned int n, int best)
{
	return best < 0 || c->free[n] > c->free[best] ||
	       (c->free[n] == c->free[best] && c->first[n] < c->first[best]);
}

/*
 * Returns the one NUMA node to take need GPUs from, or -1 when none has room
 * (or, for --same-numa, when the container's GPUs are on a node without
 * it). The node of the container's GPUs comes first, then that of its CPUs,
 * then the one with the most free GPUs; *because says which, for the reply.
 */
static int one_node(const struct topo_counts *c, unsigned int need, const struct alloc_request *req,
		    const char **because)
{
	int cpu = req->cpus ? req->cpus->node : -1, best = -1;

	if (c->held_node >= 0 && c->free[c->held_node] >= need) {
		*because = ", with the container's other GPUs";
		return c->held_node;
	}
	if (c->held_node != -1 && req->same_numa)
		return -1;
	if (cpu >= 0 && cpu < DG_MAX_NUMA && c->free[cpu] >= need) {
		*because = "";
		return cpu;
	}
	for (unsigned int n = 0; n < DG_MAX_NUMA; n++) {
		if (c->free[n] >= need && roomier(c, n, best))
			best = (int)n;
	}
	*because = ", the node with the most free GPUs";
	return best;
}

/*
 * Sets quota[n], how many GPUs to take from node n, so that need is spread
 * over the fewest nodes, roomiest first; what is left comes from GPUs of no
 * known node (quota[DG_MAX_NUMA]).
 */
static void spread(const struct topo_counts *c, unsigned int need, unsigned int *quota)
{
	bool used[DG_MAX_NUMA] = { false };

	while (need) {
		int best = -1;

		for (unsigned int n = 0; n < DG_MAX_NUMA; n++) {
			if (!used[n] && c->free[n] && roomier(c, n, best))
				best = (int)n;
		}
		if (best < 0)
			break;
		used[best] = true;
		quota[best] = c->free[best] < need ? c->free[best] : need;
		need -= quota[best];
	}
	quota[DG_MAX_NUMA] = need;
}

/* Writes each node's free and matching GPUs, "node 0: 1 free of 2, node 1: 0 free of 2". */
static void node_table(const struct topo_counts *c, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned int n = 0; n < DG_MAX_NUMA && off < len; n++) {
		if (c->matching[n])
			off += (size_t)snprintf(buf + off, len - off, "%snode %u: %u free of %u",
						off ? ", " : "", n, c->free[n], c->matching[n]);
	}
	if (!off)
		snprintf(buf, len, "no GPU says its NUMA node");
}

/*
 * Returns whether some node has count GPUs that match, free or not: whether
 * a --same-numa request could be met one day.
 */
static bool numa_ever(const struct topo_counts *c, unsigned int count)
{
	for (unsigned int n = 0; n < DG_MAX_NUMA; n++) {
		if (c->matching[n] >= count)
			return true;
	}
	return false;
}

/*
 * Sets err for a --same-numa request that no node can meet, and returns
 * -ENODEV when none ever could, -EBUSY when GPUs in use are in the way.
 */
static int same_numa_error(const struct topo_counts *c, const struct alloc_request *req,
			   struct dg_error *err)
{
	char nodes[512];

	node_table(c, nodes, sizeof(nodes));
	if (!numa_ever(c, req->count)) {
		dg_error_set(err, DG_E_NO_GPU, ENODEV,
			     "--same-numa: no NUMA node has %u GPUs that match, so this request "
			     "can never be met (%s)",
			     req->count, nodes);
		dg_error_hint(err, "ask for fewer GPUs, or drop --same-numa to span nodes");
		return -ENODEV;
	}
	if (c->held_node != -1) {
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
			     "--same-numa: the container's GPUs are not on one NUMA node with "
			     "room for the rest (%s)",
			     nodes);
		dg_error_hint(err, "revoke its GPUs first, or drop --same-numa");
		return -EBUSY;
	}
	dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
		     "--same-numa: no NUMA node has %u free GPUs that match (%s)", req->count,
		     nodes);
	dg_error_hint(err, "release GPUs with 'devgatectl revoke', or drop --same-numa to "
			   "span nodes");
	return -EBUSY;
}

/*
 * Writes why these GPUs, for the reply: "picked GPU 2,3: on NUMA node 1;
 * the container's CPUs (2-3) are on node 1".
 */
static void reason_text(const struct dg_inventory *inv, const bool *picked, const char *how,
			const struct alloc_request *req, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "picked GPU ");

	for (size_t i = 0; i < inv->n_gpus && off < len; i++) {
		if (picked[i])
			off += (size_t)snprintf(buf + off, len - off, "%s%u",
						buf[off - 1] == ' ' ? "" : ",", inv->gpus[i].index);
	}
	if (off < len)
		snprintf(buf + off, len - off, ": %s%s%s", how, req->cpus ? "; " : "",
			 req->cpus ? req->cpus->where : "");
}

/*
 * Marks in picked need of the GPUs elig marks: from one NUMA node when one
 * has room, else over the fewest nodes; why (may be NULL) says how. Returns
 * 0, or for --same-numa an error when no node has room.
 */
static int pick_topo(const struct dg_inventory *inv, const struct topo_counts *c,
		     const struct alloc_request *req, const bool *elig, unsigned int need,
		     bool *picked, char *why, size_t len, struct dg_error *err)
{
	unsigned int quota[DG_MAX_NUMA + 1] = { 0 };
	const char *because = "";
	char how[256];
	int node = c->known ? one_node(c, need, req, &because) : -1;

	if (node < 0 && req->same_numa)
		return same_numa_error(c, req, err);
	if (node >= 0) {
		quota[node] = need;
		snprintf(how, sizeof(how), "on NUMA node %d%s", node, because);
	} else if (!c->known) {
		quota[DG_MAX_NUMA] = need;
		snprintf(how, sizeof(how), "NUMA nodes not known, lowest free indices");
	} else {
		spread(c, need, quota);
		snprintf(how, sizeof(how), "no NUMA node has %u free, spread over the fewest",
			 need);
	}
	for (size_t i = 0; i < inv->n_gpus; i++) {
		unsigned int slot = node_slot(&inv->gpus[i]);

		if (elig[i] && quota[slot]) {
			picked[i] = true;
			quota[slot]--;
		}
	}
	if (why && len)
		reason_text(inv, picked, how, req, why, len);
	return 0;
}

/*
 * Marks in picked the free GPUs that bring self up to req->count GPUs of the
 * kind req asks for; out (may be NULL) says why those. Returns 0, or an
 * error with err saying how many match and why the others are taken.
 */
static int pick_counted(const struct dg_inventory *inv, const struct gpu_use *use,
			const struct lease *self, const struct alloc_request *req, bool *picked,
			char *out, size_t out_len, struct dg_error *err)
{
	bool elig[DG_MAX_GPUS] = { false };
	struct topo_counts c;
	unsigned int have = 0, matching = 0, free_n = 0, need;
	char cons[256], why[512], reasons[1024] = "";
	size_t rlen = 0, shown = 0;

	constraint_text(req, cons, sizeof(cons));
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &inv->gpus[i];

		if (!matches(gpu, req))
			continue;
		matching++;
		if (whole(self, gpu->uuid))
			have++;
		else if (!blocker(gpu, &use[i], req->shared, why, sizeof(why)))
			elig[i] = ++free_n;
		else if (shown++ < 4 && rlen < sizeof(reasons))
			rlen += (size_t)snprintf(reasons + rlen, sizeof(reasons) - rlen, "%s%s",
						 rlen ? "; " : "", why);
	}
	if (matching == 0) {
		dg_error_set(err, DG_E_NO_GPU, ENODEV, "no GPU on this host matches%s",
			     cons[0] ? cons : " the request");
		dg_error_hint(err,
			      "run 'devgatectl list' to see each GPU's model, arch and product");
		return -ENODEV;
	}
	topo_count(inv, self, req, elig, &c);
	if (req->same_numa && !numa_ever(&c, req->count))
		return same_numa_error(&c, req, err);
	need = req->count > have ? req->count - have : 0;
	if (free_n < need) {
		dg_error_set(err, DG_E_UNAVAILABLE, EBUSY,
			     "requested %u GPU%s%s%s: %s%u free%s%s%s", req->count,
			     req->count == 1 ? "" : "s", cons[0] ? " with" : "", cons,
			     have ? "the container holds some already, " : "", free_n,
			     reasons[0] ? " (" : "", reasons, reasons[0] ? ")" : "");
		dg_error_hint(err, "all GPUs that match are in use; release one with 'devgatectl "
				   "revoke' or ask for fewer");
		return -EBUSY;
	}
	return need ? pick_topo(inv, &c, req, elig, need, picked, out, out_len, err) : 0;
}

int alloc_pick_why(const struct dg_inventory *inv, const struct gpu_use *use,
		   const struct lease *self, const struct alloc_request *req, bool *picked,
		   char *why, size_t len, struct dg_error *err)
{
	int r = alloc_check_request(req, err);

	if (r < 0)
		return r;
	memset(picked, 0, inv->n_gpus * sizeof(*picked));
	if (req->selectors)
		r = pick_selected(inv, use, self, req, picked, err);
	else
		r = pick_counted(inv, use, self, req, picked, why, len, err);
	if (r < 0)
		memset(picked, 0, inv->n_gpus * sizeof(*picked));
	return r;
}

int alloc_pick(const struct dg_inventory *inv, const struct gpu_use *use, const struct lease *self,
	       const struct alloc_request *req, bool *picked, struct dg_error *err)
{
	return alloc_pick_why(inv, use, self, req, picked, NULL, 0, err);
}
