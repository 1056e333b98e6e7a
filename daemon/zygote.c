// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "fdpass.h"
#include "log.h"
#include "target.h"
#include "zygote.h"

#define ZYGOTE_FD 3
#define ZYGOTE_TIMEOUT_MS 1000

static struct {
	pid_t pid;
	int sock;
	zygote_child_fn fn;
	bool ordered; /* a child was asked for and not yet received */
} zygote = { 0, -1, NULL, false };

/* fork() with a socket between the two; *sock is this side's end. 0 in the child. */
static pid_t fork_paired(int *sock)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		close(sv[0]);
		close(sv[1]);
		return r;
	}
	close(sv[pid == 0 ? 0 : 1]);
	*sock = sv[pid == 0 ? 1 : 0];
	return pid;
}

static int child_fork(struct child *ret)
{
	int sock = -1;
	pid_t pid = fork_paired(&sock);

	if (pid < 0)
		return pid;
	if (pid == 0) {
		zygote.fn(sock);
		_exit(1);
	}
	*ret = (struct child){ .pid = pid, .sock = sock, .pidfd = pidfd_open_pid(pid) };
	if (ret->pidfd < 0)
		ret->pidfd = -1;
	return 0;
}

/* Sends the child's pid, socket and pidfd to devgated. */
static int zygote_send(const struct child *c)
{
	const int fds[2] = { c->sock, c->pidfd };

	return fds_send(ZYGOTE_FD, &c->pid, sizeof(c->pid), fds, c->pidfd >= 0 ? 2 : 1);
}

/* The zygote's whole life; never returns. */
static void zygote_main(int sock, pid_t parent)
{
	struct sigaction ign = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
	int devnull;
	char req;

	/* Nothing of devgated's but this socket: not its log, clients or maps. */
	if (dup2(sock, ZYGOTE_FD) < 0)
		_exit(1);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
		_exit(1);
	close_range(ZYGOTE_FD + 1, ~0U, 0);
	/* Its children are reaped by the kernel; it dies with devgated. */
	if (sigaction(SIGCHLD, &ign, NULL) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
	    getppid() != parent)
		_exit(1);
	(void)prctl(PR_SET_NAME, "devgated-zygote", 0, 0, 0);
	while (recv(ZYGOTE_FD, &req, 1, 0) == 1) {
		struct child c = { .sock = -1, .pidfd = -1 };

		if (child_fork(&c) < 0)
			continue; /* devgated sees no reply and forks itself */
		(void)zygote_send(&c);
		close(c.sock);
		if (c.pidfd >= 0)
			close(c.pidfd);
	}
	_exit(0);
}

int zygote_start(zygote_child_fn fn)
{
	pid_t parent = getpid(), pid;
	int sock = -1;

	zygote.fn = fn;
	pid = fork_paired(&sock);
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

/* The zygote's reply: the child's pid, socket and (if any) pidfd. */
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

/* A zygote that does not answer is ended; devgated forks helpers itself from then on. */
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
	r = child_fork(ret);
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
