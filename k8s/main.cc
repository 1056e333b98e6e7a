// SPDX-License-Identifier: Apache-2.0
/*
 * devgate-k8s: the kubelet device plugin (API v1beta1) for devgate's GPUs.
 *
 * Three threads of ours, plus gRPC's:
 *   main     drops privileges, then serves the plugin socket, registers
 *            with kubelet, and follows kubelet's restarts (inotify on the
 *            device-plugin directory) and signals (signalfd);
 *   source   devgated's client: a watch stream held open, a list after
 *            every event and every --poll-ms, reconnects; publishes the
 *            devices into the inventory below;
 *   gRPC     ListAndWatch streams wait on the inventory and send each
 *            change at once; the other calls read a snapshot of it.
 * What devices, health, picks and CDI names are is decided in devices.c.
 */
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <getopt.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "api.grpc.pb.h"

extern "C" {
#include "log.h"
}
#include "devgated.h"
#include "devices.h"
#include "privs.h"

namespace
{

constexpr const char *kApiVersion = "v1beta1";
constexpr const char *kKubeletSocket = "kubelet.sock";
constexpr const char *kHealthy = "Healthy";
constexpr const char *kUnhealthy = "Unhealthy";
constexpr const char *kGpusAnnotation = "devgate.io/gpus";

struct Options {
	std::string socket = "/run/devgate/devgated.sock";
	std::string plugin_dir = "/var/lib/kubelet/device-plugins";
	std::string resource = "devgate.io/gpu";
	std::string kind = "devgate.io/gpu";
	std::string endpoint;
	unsigned poll_ms = 5000;
	unsigned unreachable_ms = 5000;
	unsigned reconnect_ms = 100;
	const char *user = nullptr;
	const char *group = nullptr;
	bool verbose = false;
};

const char usage_text[] =
	"Usage: devgate-k8s [OPTIONS]\n"
	"\n"
	"Kubernetes device plugin: tells kubelet about devgated's GPUs and answers\n"
	"Allocate with devgate's CDI devices (see devgate-k8s(8)).\n"
	"\n"
	"  -s, --socket PATH        devgated's socket (default /run/devgate/devgated.sock)\n"
	"  -d, --plugin-dir DIR     kubelet's device-plugin directory\n"
	"                           (default /var/lib/kubelet/device-plugins)\n"
	"  -r, --resource NAME      extended resource (default devgate.io/gpu)\n"
	"  -k, --cdi-kind KIND      kind of devgate's CDI spec (default devgate.io/gpu)\n"
	"  -e, --endpoint NAME      the plugin's socket in DIR (default from the resource,\n"
	"                           devgate.io_gpu.sock)\n"
	"      --poll-ms MS         list devgated at least this often (default 5000)\n"
	"      --unreachable-ms MS  GPUs turn Unhealthy after devgated has been\n"
	"                           unreachable this long (default 5000)\n"
	"  -u, --user USER          run as USER, keeping only CAP_DAC_OVERRIDE\n"
	"  -g, --group GROUP        run with GROUP (devgated's socket-group)\n"
	"  -v, --verbose            debug messages\n"
	"  -h, --help               this help\n"
	"  -V, --version            the version\n"
	"\n"
	"Exit status: 0 stopped by a signal, 1 failure, 2 bad command line.\n";

using Clock = std::chrono::steady_clock;

long ms_since(Clock::time_point t)
{
	return (long)std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// The devices as devgated last said; every change kubelet would see bumps
// the generation and wakes the ListAndWatch streams.
class Inventory
{
public:
	void publish(const k8s_devices &next)
	{
		std::lock_guard<std::mutex> lock(mu_);
		bool changed = !k8s_devices_same(&devs_, &next);

		devs_ = next;
		if (changed) {
			gen_++;
			cv_.notify_all();
		}
	}
	k8s_devices snapshot()
	{
		std::lock_guard<std::mutex> lock(mu_);
		return devs_;
	}
	// Waits until the generation differs from seen (or timeout); returns it.
	unsigned long wait(unsigned long seen, k8s_devices *ret, std::chrono::milliseconds timeout)
	{
		std::unique_lock<std::mutex> lock(mu_);
		cv_.wait_for(lock, timeout, [&] { return gen_ != seen || stopping_; });
		*ret = devs_;
		return gen_;
	}
	void stop()
	{
		std::lock_guard<std::mutex> lock(mu_);
		stopping_ = true;
		cv_.notify_all();
	}
	bool stopping()
	{
		std::lock_guard<std::mutex> lock(mu_);
		return stopping_;
	}

private:
	std::mutex mu_;
	std::condition_variable cv_;
	k8s_devices devs_{};
	unsigned long gen_ = 1;
	bool stopping_ = false;
};

std::string describe(const k8s_devices &d)
{
	std::string s;

	for (size_t i = 0; i < d.n; i++) {
		s += (i ? ", " : "") + std::string(d.dev[i].id) + " " +
		     (d.dev[i].healthy ? kHealthy : kUnhealthy);
		if (!d.dev[i].healthy)
			s += std::string(" (") + d.dev[i].why + ")";
	}
	return d.n ? s : "no GPUs";
}

// devgated's side: the watch stream, lists, reconnects, unreachability.
class Source
{
public:
	Source(const Options &o, Inventory *inv) : o_(o), inv_(inv)
	{
		stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	~Source()
	{
		if (stop_fd_ >= 0)
			close(stop_fd_);
	}
	bool ok() const
	{
		return stop_fd_ >= 0;
	}
	void start()
	{
		thread_ = std::thread([this] { run(); });
	}
	void stop()
	{
		uint64_t one = 1;

		if (write(stop_fd_, &one, sizeof(one)) < 0)
			log_warning_errno(errno, "cannot wake the devgated thread: %m");
		if (thread_.joinable())
			thread_.join();
	}

private:
	// Sleeps ms, or less when asked to stop; false when asked to stop.
	bool pause(int ms, int fd = -1)
	{
		struct pollfd p[2] = { { stop_fd_, POLLIN, 0 }, { fd, POLLIN, 0 } };
		int n = poll(p, fd >= 0 ? 2 : 1, ms);

		return !(n > 0 && (p[0].revents & POLLIN));
	}

	bool list()
	{
		k8s_devices next{};
		char why[256] = "";

		if (k8s_devgated_list(o_.socket.c_str(), 2, &next, why, sizeof(why)) < 0) {
			lost(why);
			return false;
		}
		if (why[0])
			log_warning("%s", why);
		if (!reachable_)
			log_info("devgated at %s answers: %s", o_.socket.c_str(),
				 describe(next).c_str());
		reachable_ = true;
		marked_ = false;
		inv_->publish(next);
		return true;
	}

	void lost(const char *why)
	{
		if (reachable_) {
			log_warning("lost devgated: %s", why);
			down_since_ = Clock::now();
		} else if (!said_) {
			log_warning("%s", why);
		}
		reachable_ = false;
		said_ = true;
		snprintf(last_why_, sizeof(last_why_), "%s", why);
	}

	// After --unreachable-ms without devgated, kubelet must stop placing pods here.
	void check_unreachable()
	{
		long gone = ms_since(down_since_);
		k8s_devices d;
		char why[300];

		if (reachable_ || marked_ || gone < (long)o_.unreachable_ms)
			return;
		d = inv_->snapshot();
		snprintf(why, sizeof(why), "devgated unreachable for %ld ms: %s", gone, last_why_);
		k8s_devices_unreachable(&d, why);
		inv_->publish(d);
		marked_ = true;
		log_warning("%s; %zu GPU(s) reported Unhealthy", why, d.n);
	}

	void follow(k8s_watch *w)
	{
		while (list()) {
			int r;

			if (!pause((int)o_.poll_ms, k8s_watch_fd(w)))
				return;
			r = k8s_watch_read(w);
			if (r < 0) {
				lost(r == -ECONNRESET ? "devgated closed the watch stream"
						      : strerror(-r));
				return;
			}
		}
	}

	void run()
	{
		down_since_ = Clock::now();
		while (!inv_->stopping()) {
			k8s_watch *w = nullptr;
			char why[256] = "";

			if (k8s_watch_open(o_.socket.c_str(), 2, &w, why, sizeof(why)) == 0) {
				log_debug("watching devgated at %s", o_.socket.c_str());
				follow(w);
				k8s_watch_free(w);
			} else {
				lost(why);
			}
			check_unreachable();
			if (!pause((int)o_.reconnect_ms))
				return;
		}
	}

	const Options &o_;
	Inventory *inv_;
	int stop_fd_ = -1;
	std::thread thread_;
	Clock::time_point down_since_; // since when devgated does not answer
	bool reachable_ = false, said_ = false, marked_ = false;
	char last_why_[256] = "";
};

grpc::Status refuse(grpc::StatusCode code, const std::string &why)
{
	log_warning("%s", why.c_str());
	return grpc::Status(code, why);
}

class Plugin final : public v1beta1::DevicePlugin::Service
{
public:
	Plugin(const Options &o, Inventory *inv) : o_(o), inv_(inv)
	{
	}

	grpc::Status GetDevicePluginOptions(grpc::ServerContext *, const v1beta1::Empty *,
					    v1beta1::DevicePluginOptions *ret) override
	{
		ret->set_pre_start_required(false);
		ret->set_get_preferred_allocation_available(true);
		return grpc::Status::OK;
	}

	grpc::Status ListAndWatch(grpc::ServerContext *ctx, const v1beta1::Empty *,
				  grpc::ServerWriter<v1beta1::ListAndWatchResponse> *w) override
	{
		unsigned long sent = 0;

		log_info("kubelet opened ListAndWatch");
		while (!ctx->IsCancelled() && !inv_->stopping()) {
			k8s_devices d;
			unsigned long gen = inv_->wait(sent, &d, std::chrono::milliseconds(200));
			v1beta1::ListAndWatchResponse resp;

			if (gen == sent)
				continue;
			for (size_t i = 0; i < d.n; i++) {
				v1beta1::Device *dev = resp.add_devices();

				dev->set_id(d.dev[i].id);
				dev->set_health(d.dev[i].healthy ? kHealthy : kUnhealthy);
			}
			if (!w->Write(resp))
				break;
			log_info("sent kubelet %s", describe(d).c_str());
			sent = gen;
		}
		log_info("ListAndWatch ended");
		return grpc::Status::OK;
	}

	// Every list is bounded before any work (devices.h), and a call kubelet
	// gave up on, or one that outlives SIGTERM, stops between containers.
	grpc::Status GetPreferredAllocation(grpc::ServerContext *ctx,
					    const v1beta1::PreferredAllocationRequest *req,
					    v1beta1::PreferredAllocationResponse *ret) override
	{
		k8s_devices d = inv_->snapshot();
		grpc::Status st = bounded("GetPreferredAllocation", req->container_requests_size());

		if (!st.ok())
			return st;
		for (const auto &c : req->container_requests()) {
			std::vector<const char *> avail, must, pick;
			auto *out = ret->add_container_responses();
			char why[K8S_WHY_MAX];
			int n;

			if (ctx->IsCancelled() || inv_->stopping())
				return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
			if (k8s_pick_check((size_t)c.available_deviceids_size(),
					   (size_t)c.must_include_deviceids_size(),
					   c.allocation_size(), why, sizeof(why)) < 0)
				return refuse(grpc::StatusCode::INVALID_ARGUMENT,
					      std::string("GetPreferredAllocation: ") + why);
			for (const auto &id : c.available_deviceids())
				avail.push_back(id.c_str());
			for (const auto &id : c.must_include_deviceids())
				must.push_back(id.c_str());
			pick.resize((size_t)c.allocation_size());
			n = k8s_pick(&d, avail.data(), avail.size(), must.data(), must.size(),
				     pick.size(), pick.data());
			if (n < 0)
				return refuse(grpc::StatusCode::INVALID_ARGUMENT,
					      "GetPreferredAllocation: request out of bounds");
			for (int i = 0; i < n; i++)
				out->add_deviceids(pick[(size_t)i]);
		}
		return grpc::Status::OK;
	}

	grpc::Status Allocate(grpc::ServerContext *, const v1beta1::AllocateRequest *req,
			      v1beta1::AllocateResponse *ret) override
	{
		k8s_devices d = inv_->snapshot();
		grpc::Status st = bounded("Allocate", req->container_requests_size());

		if (!st.ok())
			return st;
		for (const auto &c : req->container_requests()) {
			std::vector<const char *> ids;
			auto *out = ret->add_container_responses();
			std::string gpus;
			char why[K8S_WHY_MAX + 128];
			int r;

			for (const auto &id : c.devices_ids())
				ids.push_back(id.c_str());
			r = k8s_allocate_check(&d, ids.data(), ids.size(), why, sizeof(why));
			if (r < 0)
				return refuse(r == -ENOENT  ? grpc::StatusCode::NOT_FOUND
					      : r == -E2BIG ? grpc::StatusCode::INVALID_ARGUMENT
							    : grpc::StatusCode::FAILED_PRECONDITION,
					      std::string("Allocate: ") + why);
			for (const char *id : ids) {
				char name[K8S_ID_MAX + 256];

				if (k8s_cdi_name(o_.kind.c_str(), id, name, sizeof(name)) < 0)
					return refuse(grpc::StatusCode::INTERNAL,
						      "Allocate: CDI name too long");
				out->add_cdi_devices()->set_name(name);
				gpus += (gpus.empty() ? "" : ",") + std::string(id);
			}
			// For runtimes without CDI: the hooks.d entry matches it. Where
			// both arrive, the hook takes the CDI request, and granting
			// one GPU twice is one grant.
			if (gpus.empty())
				continue;
			(*out->mutable_annotations())[kGpusAnnotation] = gpus;
			log_info("allocated %s", gpus.c_str());
		}
		return grpc::Status::OK;
	}

	grpc::Status PreStartContainer(grpc::ServerContext *,
				       const v1beta1::PreStartContainerRequest *,
				       v1beta1::PreStartContainerResponse *) override
	{
		return grpc::Status::OK;
	}

private:
	// A request for more containers than a pod has: refused before any work.
	static grpc::Status bounded(const char *call, int containers)
	{
		if (containers <= K8S_MAX_CONTAINERS)
			return grpc::Status::OK;
		return refuse(grpc::StatusCode::INVALID_ARGUMENT,
			      std::string(call) + ": " + std::to_string(containers) +
				      " container requests, more than the " +
				      std::to_string(K8S_MAX_CONTAINERS) + " devgate-k8s takes");
	}

	const Options &o_;
	Inventory *inv_;
};

bool exists(const std::string &path)
{
	struct stat st;

	// stat(), not access(): access() asks with the real uid, and CAP_DAC_OVERRIDE
	// is what lets this process into kubelet's directory.
	return stat(path.c_str(), &st) == 0;
}

// Which kubelet.sock this is: a restarted kubelet makes a new one.
std::pair<dev_t, ino_t> identity(const std::string &path)
{
	struct stat st;

	if (stat(path.c_str(), &st) < 0)
		return { 0, 0 };
	return { st.st_dev, st.st_ino };
}

class Agent
{
public:
	Agent(const Options &o, Inventory *inv) : o_(o), plugin_(o, inv)
	{
	}

	std::string endpoint_path() const
	{
		return o_.plugin_dir + "/" + o_.endpoint;
	}

	bool serve()
	{
		grpc::ServerBuilder b;

		stop_serving();
		if (unlink(endpoint_path().c_str()) < 0 && errno != ENOENT)
			log_warning_errno(errno, "cannot remove %s: %m", endpoint_path().c_str());
		b.AddListeningPort("unix://" + endpoint_path(), grpc::InsecureServerCredentials());
		// Every list of a request is bounded (devices.h); so is the whole.
		b.SetMaxReceiveMessageSize(K8S_MAX_MESSAGE);
		b.RegisterService(&plugin_);
		server_ = b.BuildAndStart();
		if (!server_) {
			log_error("cannot serve the device plugin on %s", endpoint_path().c_str());
			return false;
		}
		log_info("serving the device plugin on %s", endpoint_path().c_str());
		return true;
	}

	void stop_serving()
	{
		if (!server_)
			return;
		server_->Shutdown(std::chrono::system_clock::now() +
				  std::chrono::milliseconds(500));
		server_->Wait();
		server_.reset();
	}

	// Registration.Register on kubelet.sock; false when kubelet refused or is gone.
	bool register_with_kubelet()
	{
		std::string sock = o_.plugin_dir + "/" + kKubeletSocket;
		auto id = identity(sock);
		auto ch = grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials());
		auto stub = v1beta1::Registration::NewStub(ch);
		grpc::ClientContext ctx;
		v1beta1::RegisterRequest req;
		v1beta1::Empty empty;

		ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
		req.set_version(kApiVersion);
		req.set_endpoint(o_.endpoint);
		req.set_resource_name(o_.resource);
		req.mutable_options()->set_pre_start_required(false);
		req.mutable_options()->set_get_preferred_allocation_available(true);
		grpc::Status st = stub->Register(&ctx, req, &empty);
		if (!st.ok()) {
			log_warning("kubelet at %s refused or failed Register: %s", sock.c_str(),
				    st.error_message().c_str());
			return false;
		}
		log_info("registered %s with kubelet at %s (endpoint %s)", o_.resource.c_str(),
			 sock.c_str(), o_.endpoint.c_str());
		registered_with_ = id;
		return true;
	}

	// The main loop: signals, kubelet restarts, retries. Returns the exit status.
	int run(int sig_fd, int ino_fd)
	{
		bool need_register = true;

		if (!serve())
			return 1;
		for (;;) {
			struct pollfd p[2] = { { sig_fd, POLLIN, 0 }, { ino_fd, POLLIN, 0 } };
			bool kubelet_up = exists(o_.plugin_dir + "/" + kKubeletSocket);
			int n;

			if (need_register && kubelet_up)
				need_register = !register_with_kubelet();
			// Retry a failed Register each second; otherwise wait for events.
			n = poll(p, 2, need_register && kubelet_up ? 1000 : -1);
			if (n < 0 && errno != EINTR) {
				log_error_errno(errno, "poll: %m");
				return 1;
			}
			if (n > 0 && (p[0].revents & POLLIN)) {
				struct signalfd_siginfo si;

				if (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
					log_info("signal %u: stopping", si.ssi_signo);
				return 0;
			}
			if (n > 0 && (p[1].revents & POLLIN) &&
			    !directory_events(ino_fd, &need_register))
				return 1;
		}
	}

	void shutdown()
	{
		stop_serving();
		(void)unlink(endpoint_path().c_str());
	}

private:
	// kubelet's restart: it removes every socket in the directory (ours too)
	// and makes kubelet.sock anew. Either means: serve again, register again.
	bool directory_events(int ino_fd, bool *need_register)
	{
		alignas(struct inotify_event) char buf[4096];
		ssize_t len = read(ino_fd, buf, sizeof(buf));
		bool kubelet_new = false, ours_gone = false;

		if (len < 0)
			return errno == EAGAIN || errno == EINTR;
		for (char *p = buf; p < buf + len;) {
			auto *ev = reinterpret_cast<struct inotify_event *>(p);

			// Events lost: look at both sockets again.
			if (ev->mask & IN_Q_OVERFLOW)
				kubelet_new = ours_gone = true;
			if (ev->mask & (IN_IGNORED | IN_DELETE_SELF)) {
				log_error("the device-plugin directory %s is gone",
					  o_.plugin_dir.c_str());
				return false;
			}
			if (ev->len && strcmp(ev->name, kKubeletSocket) == 0 &&
			    (ev->mask & (IN_CREATE | IN_MOVED_TO)))
				kubelet_new = true;
			if (ev->len && o_.endpoint == ev->name &&
			    (ev->mask & (IN_DELETE | IN_MOVED_FROM)))
				ours_gone = true;
			p += sizeof(*ev) + ev->len;
		}
		// Our own restart of the server deletes and makes the socket too.
		if (ours_gone && !exists(endpoint_path())) {
			log_info("%s was removed (kubelet restarting?): serving again",
				 endpoint_path().c_str());
			if (!serve())
				return false;
			*need_register = true;
		}
		// Registered with this kubelet.sock already (our socket's removal came first).
		if (kubelet_new &&
		    identity(o_.plugin_dir + "/" + kKubeletSocket) != registered_with_) {
			log_info("kubelet.sock is new (kubelet restarted): registering again");
			if (!exists(endpoint_path()) && !serve())
				return false;
			*need_register = true;
		}
		return true;
	}

	const Options &o_;
	Plugin plugin_;
	std::unique_ptr<grpc::Server> server_;
	std::pair<dev_t, ino_t> registered_with_{ 0, 0 };
};

bool parse_ms(const char *s, unsigned *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v == 0 || v > INT_MAX)
		return false;
	*ret = (unsigned)v;
	return true;
}

enum {
	OPT_POLL = 256,
	OPT_UNREACHABLE
};

// 0: go on; 1: printed help or version; 2: usage error (printed).
int parse_options(int argc, char **argv, Options *o)
{
	static const struct option opts[] = {
		{ "socket", required_argument, nullptr, 's' },
		{ "plugin-dir", required_argument, nullptr, 'd' },
		{ "resource", required_argument, nullptr, 'r' },
		{ "cdi-kind", required_argument, nullptr, 'k' },
		{ "endpoint", required_argument, nullptr, 'e' },
		{ "poll-ms", required_argument, nullptr, OPT_POLL },
		{ "unreachable-ms", required_argument, nullptr, OPT_UNREACHABLE },
		{ "user", required_argument, nullptr, 'u' },
		{ "group", required_argument, nullptr, 'g' },
		{ "verbose", no_argument, nullptr, 'v' },
		{ "help", no_argument, nullptr, 'h' },
		{ "version", no_argument, nullptr, 'V' },
		{ nullptr, 0, nullptr, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "s:d:r:k:e:u:g:vhV", opts, nullptr)) != -1) {
		switch (c) {
		case 's':
			o->socket = optarg;
			break;
		case 'd':
			o->plugin_dir = optarg;
			break;
		case 'r':
			o->resource = optarg;
			break;
		case 'k':
			o->kind = optarg;
			break;
		case 'e':
			o->endpoint = optarg;
			break;
		case OPT_POLL:
		case OPT_UNREACHABLE:
			if (!parse_ms(optarg, c == OPT_POLL ? &o->poll_ms : &o->unreachable_ms)) {
				fprintf(stderr,
					"devgate-k8s: --%s wants milliseconds > 0, not '%s'\n",
					c == OPT_POLL ? "poll-ms" : "unreachable-ms", optarg);
				return 2;
			}
			break;
		case 'u':
			o->user = optarg;
			break;
		case 'g':
			o->group = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 1;
		case 'V':
			printf("devgate-k8s %s\n", DEVGATE_VERSION);
			return 1;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "devgate-k8s: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o->resource.find('/') == std::string::npos || o->kind.find('/') == std::string::npos) {
		fprintf(stderr, "devgate-k8s: --resource and --cdi-kind are DOMAIN/NAME\n");
		return 2;
	}
	if (o->endpoint.empty()) {
		o->endpoint = o->resource + ".sock";
		for (char &ch : o->endpoint)
			if (ch == '/')
				ch = '_';
	}
	if (o->endpoint.find('/') != std::string::npos || o->endpoint == kKubeletSocket) {
		fprintf(stderr, "devgate-k8s: --endpoint is a file name in the plugin directory\n");
		return 2;
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	Options o;
	Inventory inv;
	sigset_t mask;
	char why[512] = "";
	int r = parse_options(argc, argv, &o), sig_fd, ino_fd, status;

	if (r)
		return r == 1 ? 0 : 2;
	log_init("devgate-k8s", o.verbose ? LOG_DEBUG : LOG_INFO);
	// Before any thread exists: ids and capabilities are per thread.
	if (k8s_drop_privileges(o.user, o.group, why, sizeof(why)) < 0) {
		log_error("%s", why);
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	// Blocked in every thread started from here; read from a signalfd.
	pthread_sigmask(SIG_BLOCK, &mask, nullptr);
	signal(SIGPIPE, SIG_IGN);
	sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	ino_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (sig_fd < 0 || ino_fd < 0) {
		log_error_errno(errno, "signalfd or inotify: %m");
		return 1;
	}
	if (inotify_add_watch(ino_fd, o.plugin_dir.c_str(),
			      IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM |
				      IN_DELETE_SELF) < 0) {
		log_error_errno(errno, "cannot watch the device-plugin directory %s: %m",
				o.plugin_dir.c_str());
		return 1;
	}
	log_info("devgate-k8s %s: resource %s, CDI kind %s, devgated at %s, uid %u gid %u",
		 DEVGATE_VERSION, o.resource.c_str(), o.kind.c_str(), o.socket.c_str(),
		 (unsigned)getuid(), (unsigned)getgid());

	Source source(o, &inv);
	if (!source.ok()) {
		log_error_errno(errno, "eventfd: %m");
		return 1;
	}
	source.start();
	{
		Agent agent(o, &inv);

		status = agent.run(sig_fd, ino_fd);
		inv.stop();
		agent.shutdown();
	}
	source.stop();
	close(ino_fd);
	close(sig_fd);
	return status;
}
