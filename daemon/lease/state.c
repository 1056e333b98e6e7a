// SPDX-License-Identifier: Apache-2.0
/*
 * The state directory: lease records and journals as files under leases/,
 * each written whole (a temporary file renamed into place), and the lock
 * that keeps a second daemon out. This file moves bytes to and from those
 * files (and makes the directory again if it is removed while devgated
 * runs); what a record says is record.c's. It must not change the lease
 * table beyond adding what it loads, nor act on the kernel: reconcile.c
 * decides what a record or journal found at start means.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "log.h"
#include "record.h"
#include "state.h"
#include "util.h"

#define LEASE_FILE_MAX ((size_t)256 * 1024)
/* The journal of a partial revoke: the lease as it will be (next), renamed onto the record. */
#define REVOKE_TO ".revoke-to"

struct state {
	char *dir;
	int lock_fd;
	int leases_fd;
	/* leases_fd's, taken once: the inode an open fd names never changes. */
	struct stat leases_st;
	size_t broken;
	const struct lease_table *table; /* state_load's: written again if leases/ goes */
	/* The journal written last, as its text: a commit renames it into place when it matches. */
	struct {
		uint64_t cgid;
		const char *suffix;
		char *text;
	} last;
};

void state_close(struct state *s)
{
	if (!s)
		return;
	safe_close(s->lock_fd);
	safe_close(s->leases_fd);
	free(s->last.text);
	free(s->dir);
	free(s);
}

static void import_legacy(struct state *s, const char *legacy_dir);

int state_open(const char *dir, const char *legacy_dir, struct state **ret, struct dg_error *err)
{
	struct state *s;
	char path[4096];
	int r;

	r = mkdir_p(dir, 0700);
	if (r < 0)
		return dg_error_set(err, DG_E_STATE, r, "cannot create state directory %s: %s", dir,
				    strerror(-r));
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = s->leases_fd = -1;
	s->dir = strdup(dir);
	snprintf(path, sizeof(path), "%s/lock", dir);
	s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0) {
		r = dg_error_set(err, DG_E_STATE, errno, "cannot open %s: %m", path);
		goto fail;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = dg_error_set(err, DG_E_STATE, errno,
				 "state directory %s is in use by another "
				 "devgated",
				 dir);
		dg_error_hint(err, "stop the other daemon, or give this one its own --state-dir");
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/leases", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		r = dg_error_set(err, DG_E_STATE, errno, "cannot create %s: %m", path);
		goto fail;
	}
	s->leases_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (s->leases_fd < 0 || fstat(s->leases_fd, &s->leases_st) < 0) {
		r = dg_error_set(err, DG_E_STATE, errno, "cannot open %s: %m", path);
		goto fail;
	}
	if (legacy_dir && strcmp(legacy_dir, dir) != 0)
		import_legacy(s, legacy_dir);
	*ret = s;
	return 0;
fail:
	state_close(s);
	return r;
}

/*
 * Reads record file name from the leases directory and parses its JSON
 * into *ret. On failure why says what is wrong with the file: it could not
 * be read, or it is not JSON (damaged says what kind of file it should
 * have been).
 */
static int read_record(struct state *s, const char *name, const char *damaged, json_object **ret,
		       char *why, size_t why_len)
{
	auto_free char *text = NULL;
	int r = read_file_at(s->leases_fd, name, LEASE_FILE_MAX, &text, NULL);

	if (r < 0) {
		snprintf(why, why_len, "cannot read it: %s", strerror(-r));
		return r;
	}
	*ret = json_parse_object(text);
	if (!*ret) {
		snprintf(why, why_len, "%s (truncated or damaged)", damaged);
		return -EINVAL;
	}
	return 0;
}

/*
 * Reads leases/NAME, whose name must be the cgroup id of the lease it holds
 * followed by suffix, into a new lease in *ret. Returns 0, or a negative
 * errno with why saying what is wrong.
 */
static int parse_one(struct state *s, const char *name, const char *suffix, struct lease **ret,
		     char *why, size_t why_len)
{
	auto_json json_object *o = NULL;
	struct lease *l = NULL;
	char expect[64];
	int r = read_record(s, name, "not valid JSON", &o, why, why_len);

	if (r < 0)
		return r;
	if (record_decode(o, &l, why, why_len) < 0)
		return -EINVAL;
	snprintf(expect, sizeof(expect), "%llu%s", (unsigned long long)l->cgid, suffix);
	if (strcmp(expect, name) != 0) {
		snprintf(why, why_len, "it describes cgroup %llu", (unsigned long long)l->cgid);
		lease_free(l);
		return -EINVAL;
	}
	*ret = l;
	return 0;
}

/*
 * One damaged record must not keep every container from its GPUs: it goes
 * to leases/broken/ for the admin, and reconcile treats its cgroup as one
 * without a record (rebuilt from what the kernel proves, or cleaned up).
 */
static void move_aside(struct state *s, const char *name, const char *why)
{
	char dest[300];

	(void)mkdirat(s->leases_fd, "broken", 0700);
	snprintf(dest, sizeof(dest), "broken/%s", name);
	if (renameat(s->leases_fd, name, s->leases_fd, dest) < 0) {
		log_error("lease file %s/leases/%s is damaged (%s) and cannot be moved aside: %m",
			  s->dir, name, why);
		return;
	}
	s->broken++;
	log_error("lease file %s/leases/%s is damaged: %s; moved to %s/leases/%s", s->dir, name,
		  why, s->dir, dest);
}

static bool has_suffix(const char *name, const char *suffix)
{
	size_t len = strlen(name), n = strlen(suffix);

	return len > n && strcmp(name + len - n, suffix) == 0;
}

/*
 * Opens leases/ as a directory stream of its own, read from the start.
 * Returns 0 or a negative errno.
 */
static int leases_dir(struct state *s, DIR **ret)
{
	int fd = dup(s->leases_fd);

	if (fd < 0)
		return -errno;
	*ret = fdopendir(fd);
	if (!*ret) {
		close(fd);
		return -errno;
	}
	rewinddir(*ret);
	return 0;
}

/*
 * Calls fn for each file of leases/ whose name ends in suffix. Returns 0,
 * or the first error of fn or of reading the directory.
 */
static int each_file(struct state *s, const char *suffix,
		     int (*fn)(struct state *s, const char *name, void *data), void *data)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r = leases_dir(s, &d);

	if (r < 0 || !d)
		return r < 0 ? r : -EIO;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !has_suffix(de->d_name, suffix))
			continue;
		r = fn(s, de->d_name, data);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Removes the temporary files a crash mid-write left: never renamed into
 * place, they were never a record. Returns 0 or a negative errno.
 */
static int drop_tmp(struct state *s)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r = leases_dir(s, &d);

	if (r < 0 || !d)
		return r < 0 ? r : -EIO;
	while ((de = readdir(d))) {
		if (de->d_name[0] != '.' || !has_suffix(de->d_name, ".tmp"))
			continue;
		log_info("removing unfinished state write %s/leases/%s", s->dir, de->d_name);
		(void)unlinkat(s->leases_fd, de->d_name, 0);
	}
	return 0;
}

/*
 * Adds the lease of record NAME to the table data. A record that does not
 * load goes to leases/broken/. Returns 0 or -ENOMEM.
 */
static int load_record(struct state *s, const char *name, void *data)
{
	struct lease_table *out = data;
	struct lease *l = NULL;
	char why[256] = "";

	if (parse_one(s, name, ".json", &l, why, sizeof(why)) < 0) {
		move_aside(s, name, why);
		return 0;
	}
	if (lease_table_add(out, l) < 0) {
		lease_free(l);
		return -ENOMEM;
	}
	return 0;
}

int state_load(struct state *s, struct lease_table *out, struct dg_error *err)
{
	int r = drop_tmp(s);

	s->table = out;
	if (r == 0)
		r = each_file(s, ".json", load_record, out);
	if (r < 0)
		return dg_error_set(err, DG_E_STATE, r, "cannot load the leases in %s/leases: %s",
				    s->dir, strerror(-r));
	return 0;
}

size_t state_broken(const struct state *s)
{
	return s->broken;
}

/*
 * Adds the lease of journal NAME (.pending or .revoking) to out. A journal
 * that does not load was never written whole, since writes are atomic, so
 * nothing was done after it: it is removed. Returns 0 or -ENOMEM.
 */
static int load_journal(struct state *s, const char *name, const char *suffix,
			struct lease_table *out)
{
	struct lease *l = NULL;
	char why[256] = "";

	if (parse_one(s, name, suffix, &l, why, sizeof(why)) < 0) {
		log_warning("dropping unreadable journal %s/leases/%s: %s", s->dir, name, why);
		(void)unlinkat(s->leases_fd, name, 0);
		return 0;
	}
	if (lease_table_add(out, l) < 0) {
		lease_free(l);
		return -ENOMEM;
	}
	return 0;
}

static int load_pending(struct state *s, const char *name, void *data)
{
	return load_journal(s, name, ".pending", data);
}

static int load_revoking(struct state *s, const char *name, void *data)
{
	return load_journal(s, name, ".revoking", data);
}

int state_pending_load(struct state *s, struct lease_table *out)
{
	return each_file(s, ".pending", load_pending, out);
}

/*
 * Adds what the partial revoke of journal NAME (REVOKE_TO: the lease as it
 * was to be) takes: its record (the lease before) less the journal. With
 * no record to take from, there is nothing to finish.
 */
static int load_revoke_to(struct state *s, const char *name, void *data)
{
	struct lease *next = NULL, *old = NULL, *gone;
	char record[64], why[256] = "";

	if (parse_one(s, name, REVOKE_TO, &next, why, sizeof(why)) < 0) {
		log_warning("dropping unreadable journal %s/leases/%s: %s", s->dir, name, why);
		(void)unlinkat(s->leases_fd, name, 0);
		return 0;
	}
	snprintf(record, sizeof(record), "%llu.json", (unsigned long long)next->cgid);
	if (parse_one(s, record, ".json", &old, why, sizeof(why)) < 0) {
		log_warning("dropping journal %s/leases/%s: its lease has no record", s->dir, name);
		(void)unlinkat(s->leases_fd, name, 0);
		lease_free(next);
		return 0;
	}
	gone = lease_minus(old, next);
	lease_free(old);
	lease_free(next);
	if (!gone || lease_table_add(data, gone) < 0) {
		lease_free(gone);
		return -ENOMEM;
	}
	return 0;
}

int state_revoking_load(struct state *s, struct lease_table *out)
{
	int r = each_file(s, ".revoking", load_revoking, out);

	return r < 0 ? r : each_file(s, REVOKE_TO, load_revoke_to, out);
}

/* Returns whether s->leases_fd is still the directory at DIR/leases. */
static bool leases_in_place(const struct state *s)
{
	struct stat path_st;
	char path[4096];

	snprintf(path, sizeof(path), "%s/leases", s->dir);
	return lstat(path, &path_st) == 0 && S_ISDIR(path_st.st_mode) &&
	       s->leases_st.st_dev == path_st.st_dev && s->leases_st.st_ino == path_st.st_ino;
}

static int write_record(struct state *s, const struct lease *l, const char *suffix);

/*
 * The state directory, or its leases/, was removed or moved away under the
 * running daemon (an admin's rm -rf, a tmpfs cleaner): every write would
 * fail, or land where nobody reads, until a restart. Makes both again,
 * opens the new leases/ and writes the record of every lease in the table
 * that state_load filled, so none is left to a rebuild from the grants map
 * (which cannot know its devices, expiry or name). Journals of the
 * transaction in flight, if any, are lost with the directory. Returns 0 or
 * a negative errno.
 */
static int remake(struct state *s)
{
	char path[4096];
	struct stat st;
	size_t saved = 0;
	int fd, r = mkdir_p(s->dir, 0700);

	snprintf(path, sizeof(path), "%s/leases", s->dir);
	if (r < 0 || (mkdir(path, 0700) < 0 && errno != EEXIST)) {
		r = r < 0 ? r : -errno;
		log_error("state directory %s is gone and cannot be made again: %s", path,
			  strerror(-r));
		return r;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		safe_close(fd);
		log_error("cannot open the state directory %s made again: %s", path, strerror(-r));
		return r;
	}
	safe_close(s->leases_fd);
	s->leases_fd = fd;
	s->leases_st = st;
	for (size_t i = 0; s->table && i < s->table->n; i++)
		saved += write_record(s, s->table->v[i], ".json") == 0;
	log_warning("state directory %s was removed or replaced while devgated ran; made it "
		    "again and wrote the records of %zu of %zu lease(s) again",
		    path, saved, s->table ? s->table->n : 0);
	return 0;
}

/* Returns 0 when leases/ is there to write in (made again if it was not), or a negative errno. */
static int writable(struct state *s)
{
	return leases_in_place(s) ? 0 : remake(s);
}

/* l's record as text (the caller frees it), or NULL when out of memory. */
static char *encode(const struct lease *l)
{
	auto_json json_object *o = record_encode(l);

	return o ? strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								    JSON_C_TO_STRING_SPACED))
		 : NULL;
}

static void forget(struct state *s)
{
	free(s->last.text);
	s->last.text = NULL;
	s->last.suffix = NULL;
}

static bool is_journal(const char *suffix)
{
	return strcmp(suffix, ".pending") == 0 || strcmp(suffix, REVOKE_TO) == 0;
}

/* Writes l's record as leases/CGID<suffix>, replacing the file before at once. */
static int write_record(struct state *s, const struct lease *l, const char *suffix)
{
	char *text = encode(l);
	char name[64];
	int r;

	if (!text)
		return -ENOMEM;
	snprintf(name, sizeof(name), "%llu%s", (unsigned long long)l->cgid, suffix);
	/* No fsync: the records die with a reboot, like what they describe. */
	r = write_file_atomic_at(s->leases_fd, name, text, strlen(text), 0600, false);
	if (r == 0 && is_journal(suffix)) {
		forget(s);
		s->last.cgid = l->cgid;
		s->last.suffix = suffix;
		s->last.text = text;
		return 0;
	}
	if (s->last.cgid == l->cgid && s->last.suffix && strcmp(s->last.suffix, suffix) == 0)
		forget(s);
	free(text);
	return r;
}

static int save_as(struct state *s, const struct lease *l, const char *suffix)
{
	int r = writable(s);

	return r < 0 ? r : write_record(s, l, suffix);
}

/* Removes leases/CGID<suffix>; a file that is not there is fine. */
static int remove_as(struct state *s, uint64_t cgid, const char *suffix)
{
	char name[64];

	snprintf(name, sizeof(name), "%llu%s", (unsigned long long)cgid, suffix);
	if (s->last.cgid == cgid && s->last.suffix && strcmp(s->last.suffix, suffix) == 0)
		forget(s);
	if (unlinkat(s->leases_fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/*
 * Renames the journal leases/CGID<from>, written last, to CGID<to> when it
 * holds l's record byte for byte: a commit with no write. Returns 1 when
 * renamed, 0 when it does not hold l (the caller writes), or a negative
 * errno.
 */
static int promote(struct state *s, const struct lease *l, const char *from, const char *to)
{
	auto_free char *text = NULL;
	char a[64], b[64];

	if (!s->last.text || s->last.cgid != l->cgid || strcmp(s->last.suffix, from) != 0 ||
	    !leases_in_place(s))
		return 0;
	text = encode(l);
	if (!text)
		return -ENOMEM;
	if (strcmp(text, s->last.text) != 0)
		return 0;
	snprintf(a, sizeof(a), "%llu%s", (unsigned long long)l->cgid, from);
	snprintf(b, sizeof(b), "%llu%s", (unsigned long long)l->cgid, to);
	forget(s);
	if (renameat(s->leases_fd, a, s->leases_fd, b) < 0)
		return errno == ENOENT ? 0 : -errno;
	return 1;
}

int state_save(struct state *s, const struct lease *l)
{
	return save_as(s, l, ".json");
}

int state_remove(struct state *s, uint64_t cgid)
{
	return remove_as(s, cgid, ".json");
}

int state_pending_save(struct state *s, const struct lease *next)
{
	return save_as(s, next, ".pending");
}

int state_pending_clear(struct state *s, uint64_t cgid)
{
	return remove_as(s, cgid, ".pending");
}

int state_pending_commit(struct state *s, const struct lease *next)
{
	int r = promote(s, next, ".pending", ".json");

	if (r != 0)
		return r < 0 ? r : 0;
	r = state_save(s, next);
	if (r == 0)
		(void)state_pending_clear(s, next->cgid);
	return r;
}

int state_revoking_mark(struct state *s, const struct lease *l)
{
	return save_as(s, l, ".revoking");
}

/* Whether leases/CGID.json holds l's record byte for byte. */
static bool record_is(struct state *s, const struct lease *l)
{
	auto_free char *text = NULL, *have = NULL;
	char name[64];

	snprintf(name, sizeof(name), "%llu.json", (unsigned long long)l->cgid);
	if (!leases_in_place(s) ||
	    read_file_at(s->leases_fd, name, LEASE_FILE_MAX, &have, NULL) < 0)
		return false;
	text = encode(l);
	return text && strcmp(text, have) == 0;
}

int state_revoke_begin(struct state *s, const struct lease *gone, const struct lease *next)
{
	char a[64], b[64];

	if (lease_holds(next))
		return save_as(s, next, REVOKE_TO);
	/* A full revoke: the record is the journal, moved (no write) when it is gone's. */
	if (record_is(s, gone)) {
		snprintf(a, sizeof(a), "%llu.json", (unsigned long long)gone->cgid);
		snprintf(b, sizeof(b), "%llu.revoking", (unsigned long long)gone->cgid);
		if (renameat(s->leases_fd, a, s->leases_fd, b) == 0)
			return 0;
	}
	return save_as(s, gone, ".revoking");
}

/* Whether the journal written last is next's REVOKE_TO: its record waits for the end. */
static bool deferred(const struct state *s, const struct lease *next)
{
	return s->last.text && s->last.cgid == next->cgid && strcmp(s->last.suffix, REVOKE_TO) == 0;
}

int state_revoke_record(struct state *s, const struct lease *next)
{
	if (!lease_holds(next))
		return state_remove(s, next->cgid);
	return deferred(s, next) ? 0 : state_save(s, next);
}

int state_revoke_end(struct state *s, const struct lease *next)
{
	int r;

	if (deferred(s, next)) {
		r = promote(s, next, REVOKE_TO, ".json");
		if (r > 0)
			return 0; /* the record and the journal's end in one rename */
		if (r == 0)
			r = state_save(s, next);
		if (r < 0)
			return r;
	}
	return state_revoking_clear(s, next->cgid);
}

int state_revoking_clear(struct state *s, uint64_t cgid)
{
	int r = remove_as(s, cgid, ".revoking");
	int r2 = remove_as(s, cgid, REVOKE_TO);

	return r < 0 ? r : r2;
}

/*
 * Moves the records an older devgated kept in legacy_dir (/var/lib/devgate,
 * fsync'd) here, once, so that an upgrade keeps the leases of running
 * containers. A record that cannot be moved stays where it is.
 */
static void import_legacy(struct state *s, const char *legacy_dir)
{
	char path[4096];
	auto_close int fd = -1;
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/leases", legacy_dir);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	d = fdopendir(TAKE_FD(fd));
	if (!d)
		return;
	while ((de = readdir(d))) {
		auto_free char *text = NULL;
		size_t len = 0;

		if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".json"))
			continue;
		if (read_file_at(dirfd(d), de->d_name, LEASE_FILE_MAX, &text, &len) < 0 ||
		    write_file_atomic_at(s->leases_fd, de->d_name, text, len, 0600, false) < 0)
			continue;
		(void)unlinkat(dirfd(d), de->d_name, 0);
		n++;
	}
	if (n)
		log_notice("moved %zu lease record(s) from %s to %s (records now live on tmpfs)", n,
			   path, s->dir);
}

/* A move's journal: {"to": "CGID", "lease": the part that moves, as a record}. */
int state_moving_mark(struct state *s, const struct lease *gone, uint64_t to)
{
	auto_json json_object *o = record_move_encode(gone, to);
	const char *text;
	char name[64];
	int r;

	if (!o)
		return -ENOMEM;
	r = writable(s);
	if (r < 0)
		return r;
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED);
	snprintf(name, sizeof(name), "%llu.moving", (unsigned long long)gone->cgid);
	return write_file_atomic_at(s->leases_fd, name, text, strlen(text), 0600, false);
}

int state_moving_clear(struct state *s, uint64_t cgid)
{
	return remove_as(s, cgid, ".moving");
}

/*
 * Reads the move journal NAME into a new lease (*ret), what moves, and *to,
 * the destination's cgroup id. Returns 0, or a negative errno with why
 * saying what is wrong.
 */
static int parse_move(struct state *s, const char *name, struct lease **ret, uint64_t *to,
		      char *why, size_t why_len)
{
	auto_json json_object *o = NULL;
	char expect[64];
	int r = read_record(s, name, "not a move journal", &o, why, why_len);

	if (r < 0)
		return r;
	if (record_move_decode(o, ret, to, why, why_len) < 0)
		return -EINVAL;
	snprintf(expect, sizeof(expect), "%llu.moving", (unsigned long long)(*ret)->cgid);
	if (strcmp(expect, name) != 0) {
		snprintf(why, why_len, "it describes cgroup %llu",
			 (unsigned long long)(*ret)->cgid);
		lease_free(*ret);
		return -EINVAL;
	}
	return 0;
}

struct moving_walk {
	void (*fn)(void *data, const struct lease *gone, uint64_t to);
	void *data;
};

static int load_moving(struct state *s, const char *name, void *data)
{
	struct moving_walk *w = data;
	struct lease *l = NULL;
	uint64_t to = 0;
	char why[256] = "";

	if (parse_move(s, name, &l, &to, why, sizeof(why)) < 0) {
		log_warning("dropping unreadable journal %s/leases/%s: %s", s->dir, name, why);
		(void)unlinkat(s->leases_fd, name, 0);
		return 0;
	}
	w->fn(w->data, l, to);
	lease_free(l);
	return 0;
}

int state_moving_each(struct state *s,
		      void (*fn)(void *data, const struct lease *gone, uint64_t to), void *data)
{
	struct moving_walk w = { fn, data };

	return each_file(s, ".moving", load_moving, &w);
}
