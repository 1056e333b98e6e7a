// SPDX-License-Identifier: Apache-2.0
/*
 * Starts and talks to the zygote, the small process that forks node
 * helpers for devgated (see zygote.h for why): devgated-node executed from
 * a sealed memfd, or, where that fails, a fork of devgated. Also ends
 * helpers, by pidfd where the kernel has one. It must not hand the zygote
 * anything but its setup and one-byte requests, nor wait on it longer than
 * ZYGOTE_TIMEOUT_MS: a zygote that does not answer is ended, and devgated
 * forks helpers itself from then on.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "helper/fdpass.h"
#include "helper/helper.h"
#include "log.h"
#include "sys/target.h"
#include "zygote.h"

#define ZYGOTE_TIMEOUT_MS 1000

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: say so, or vm.memfd_noexec may refuse it */
#endif

/* devgated-node, built into devgated (node_blob.S): no file on disk to trust. */
extern const unsigned char node_bin[];
extern const uint64_t node_bin_size;

/* The zygote: its pid (0 when none) and devgated's end of its socket. */
static struct {
	pid_t pid;
	int sock;
	zygote_child_fn fn; /* what each child runs */
	bool ordered;	    /* a child was asked for and not yet received */
} zygote = { 0, -1, NULL, false };

/*
 * The whole life of a zygote forked from devgated (where devgated-node
 * cannot run): keeps only its socket, then forks children on request until
 * devgated hangs up. Never returns.
 */
static void zygote_main(int sock, pid_t parent)
{
	struct sigaction ign = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
	int devnull;

	/* Nothing of devgated's but this socket: not its log, clients or maps. */
	if (dup2(sock, FORKLOOP_FD) < 0)
		_exit(1);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
		_exit(1);
	close_range(FORKLOOP_FD + 1, ~0U, 0);
	/* Its children are reaped by the kernel; it dies with devgated. */
	if (sigaction(SIGCHLD, &ign, NULL) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
	    getppid() != parent)
		_exit(1);
	(void)prctl(PR_SET_NAME, "devgated-zygote", 0, 0, 0);
	forkloop_serve(zygote.fn);
}

/* Returns a sealed memfd holding devgated-node's bytes, to execute; -errno. */
static int node_memfd(void)
{
	size_t len = (size_t)node_bin_size, off = 0;
	auto_close int fd =
		memfd_create("devgated-node", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);

	if (fd < 0 && errno == EINVAL) /* before 6.3 */
		fd = memfd_create("devgated-node", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, node_bin + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/*
 * In the forked child: puts fds 0-2 on /dev/null and the socket on fd 3,
 * closes everything else and executes devgated-node from the memfd. Never
 * returns (exit status 127 when it cannot).
 */
static void exec_node(int sock, int memfd)
{
	char *const argv[] = { (char *)"devgated-zygote", NULL };
	char *const envp[] = { NULL };
	/* Out of the way first: either may sit where fds 0-4 go. */
	int s = fcntl(sock, F_DUPFD_CLOEXEC, 10), m = fcntl(memfd, F_DUPFD_CLOEXEC, 10);
	/* Not close-on-exec: if it lands on 0-2 it stays; on 3 or 4 it is replaced. */
	int devnull = open("/dev/null", O_RDWR);

	if (s < 0 || m < 0 || devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
	    dup2(devnull, 2) < 0 || dup2(s, FORKLOOP_FD) < 0 ||
	    dup3(m, FORKLOOP_FD + 1, O_CLOEXEC) < 0)
		_exit(127);
	close_range(FORKLOOP_FD + 2, ~0U, 0);
	/* The memfd goes with the exec; the socket stays. */
	syscall(SYS_execveat, FORKLOOP_FD + 1, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

/*
 * Fills s, devgated-node's first message: what a fork of devgated would
 * have inherited (its capabilities, its pid) and the helpers' filter.
 * -E2BIG for a filter that does not fit the message; -errno.
 */
static int setup_msg(const struct sock_fprog *filter, struct helper_setup *s)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (!filter || filter->len > HELPER_FILTER_MAX || filter->len == 0)
		return -E2BIG;
	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	memset(s, 0, sizeof(*s));
	s->job_size = sizeof(struct helper_job);
	s->parent = getpid();
	s->effective = d[0].effective | ((uint64_t)d[1].effective << 32);
	s->permitted = d[0].permitted | ((uint64_t)d[1].permitted << 32);
	s->filter_len = filter->len;
	memcpy(s->filter, filter->filter, filter->len * sizeof(*filter->filter));
	return 0;
}

/* Waits for the zygote's "ready" byte: 0, -ETIMEDOUT, or -EPROTO for anything else. */
static int zygote_ready(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	char c;

	if (poll(&p, 1, ZYGOTE_TIMEOUT_MS) != 1)
		return -ETIMEDOUT;
	return recv(sock, &c, 1, 0) == 1 && c == 'r' ? 0 : -EPROTO;
}

/*
 * devgated-node as the zygote: a static program of a few mappings, where a
 * fork of devgated carries every library it links (~130 us a fork and
 * ~200 us an exit more here, per helper).
 */
static int zygote_exec(const struct sock_fprog *filter)
{
	struct helper_setup s;
	auto_close int memfd = -1;
	int sock = -1, status, r;
	pid_t pid;

	r = setup_msg(filter, &s);
	if (r < 0)
		return r;
	memfd = node_memfd();
	if (memfd < 0)
		return memfd;
	pid = forkloop_paired(&sock);
	if (pid < 0)
		return pid;
	if (pid == 0)
		exec_node(sock, memfd);
	r = send(sock, &s, sizeof(s), MSG_NOSIGNAL) == (ssize_t)sizeof(s) ? 0 : -errno;
	if (r == 0)
		r = zygote_ready(sock);
	if (r < 0) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, &status, 0);
		close(sock);
		return r;
	}
	zygote.pid = pid;
	zygote.sock = sock;
	return 0;
}

int zygote_start(zygote_child_fn fn, const struct sock_fprog *filter)
{
	pid_t parent = getpid(), pid;
	int sock = -1, r;

	zygote.fn = fn;
	r = zygote_exec(filter);
	if (r == 0)
		return 0;
	log_debug_errno(r, "cannot start devgated-node (%m); the zygote is a fork of devgated");
	pid = forkloop_paired(&sock);
	if (pid < 0)
		return pid;
	if (pid == 0)
		zygote_main(sock, parent);
	zygote.pid = pid;
	zygote.sock = sock;
	return 0;
}

void zygote_stop(void)
{
	int status;

	if (zygote.pid <= 0)
		return;
	zygote.sock = safe_close(zygote.sock); /* it sees EOF and exits */
	zygote.ordered = false;
	(void)waitpid(zygote.pid, &status, 0);
	zygote.pid = 0;
}

/* Reads the zygote's answer to a request: the child's pid, socket and (if any) pidfd. */
static int zygote_receive(struct child *ret)
{
	struct pollfd p = { .fd = zygote.sock, .events = POLLIN };
	int fds[FDPASS_MAX] = { -1, -1 };
	pid_t pid = 0;
	int n;

	if (poll(&p, 1, ZYGOTE_TIMEOUT_MS) != 1)
		return -ETIMEDOUT;
	n = fds_recv(zygote.sock, &pid, sizeof(pid), fds);
	if (n < 0)
		return n;
	if (n == 0)
		return -EPROTO;
	*ret = (struct child){ .pid = pid, .sock = fds[0], .pidfd = n > 1 ? fds[1] : -1 };
	return 0;
}

/* Ends a zygote that failed to answer (r says how); devgated forks helpers itself from then on. */
static void zygote_lost(int r)
{
	log_warning_errno(r, "the node helper zygote is gone (%m); devgated forks helpers itself");
	if (zygote.pid > 0)
		kill(zygote.pid, SIGKILL);
	zygote_stop();
}

void child_order(void)
{
	if (zygote.pid <= 0 || zygote.ordered)
		return;
	zygote.ordered = send(zygote.sock, "s", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

int child_spawn(struct child *ret)
{
	int r;

	if (zygote.pid > 0) {
		r = zygote.ordered || send(zygote.sock, "s", 1, MSG_NOSIGNAL) == 1 ? 0 : -errno;
		zygote.ordered = false;
		if (r == 0)
			r = zygote_receive(ret);
		if (r == 0)
			return 0;
		zygote_lost(r);
	}
	r = forkloop_child(zygote.fn, ret);
	if (r == 0)
		ret->ours = true;
	return r;
}

void child_end(struct child *c)
{
	int status;

	if (c->pid <= 0)
		return;
	/* Without a pidfd only our own child can be signalled safely (no PID reuse). */
	if (c->pidfd >= 0 && pidfd_alive(c->pidfd) == 0)
		(void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	else if (c->pidfd < 0 && c->ours && waitpid(c->pid, &status, WNOHANG) == 0)
		(void)kill(c->pid, SIGKILL);
	if (c->ours)
		(void)waitpid(c->pid, &status, 0);
	c->sock = safe_close(c->sock);
	c->pidfd = safe_close(c->pidfd);
	c->pid = 0;
}
