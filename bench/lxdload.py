#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""lxdload: LXD's device hot-plug over its REST API, timed in one process.

    lxdload.py -S SOCKET -n N INSTANCE NODE

Runs N cycles of adding a unix-char device (source NODE, same path inside)
to the running INSTANCE, then removing it, the way `lxc config device add`
and `remove` do it: GET the instance, PUT it back with the device added or
removed (If-Match: its ETag), wait for the operation. One connection to
LXD's unix socket is kept, as a client library keeps it, so no process
start or connect is counted. Prints one line per call:
    add <ns>     or     del <ns>
Exits 1 at the first call that fails. Standard library only.
"""
import argparse
import http.client
import json
import socket
import sys
import time

DEVICE = "dgbench"
# The writable part of an instance: what the CLI sends back.
WRITABLE = ("architecture", "config", "devices", "ephemeral", "profiles", "stateful", "description")


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("lxd")
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.unix_path)
        self.sock = s


class Lxd:
    def __init__(self, path):
        self.conn = UnixConnection(path)

    def call(self, method, url, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        self.conn.request(method, url, body=data, headers=hdrs)
        r = self.conn.getresponse()
        reply = json.loads(r.read() or b"{}")
        if reply.get("type") == "error" or r.status >= 400:
            raise RuntimeError(f"{method} {url}: {reply.get('error') or r.status}")
        return reply, r.getheader("ETag")

    def update(self, name, change):
        """GET, change the devices, PUT with the ETag, wait: one CLI call."""
        url = f"/1.0/instances/{name}"
        inst, etag = self.call("GET", url)
        put = {k: inst["metadata"][k] for k in WRITABLE if k in inst["metadata"]}
        change(put["devices"])
        op, _ = self.call("PUT", url, put, {"If-Match": etag} if etag else None)
        if op.get("type") == "async":
            done, _ = self.call("GET", op["operation"] + "/wait")
            if done["metadata"].get("status") != "Success":
                raise RuntimeError(f"PUT {url}: {done['metadata'].get('err')}")


def main():
    p = argparse.ArgumentParser(prog="lxdload.py")
    p.add_argument("-S", dest="socket", required=True)
    p.add_argument("-n", dest="cycles", type=int, default=200)
    p.add_argument("instance")
    p.add_argument("node")
    a = p.parse_args()

    lxd = Lxd(a.socket)
    dev = {"type": "unix-char", "source": a.node, "path": a.node}

    def add(devices):
        devices[DEVICE] = dev

    def remove(devices):
        devices.pop(DEVICE, None)

    clock = time.perf_counter_ns
    lines = []
    try:
        for _ in range(a.cycles):
            for kind, change in (("add", add), ("del", remove)):
                t0 = clock()
                lxd.update(a.instance, change)
                lines.append(f"{kind} {clock() - t0}\n")
    except (OSError, RuntimeError, KeyError) as e:
        print(f"lxdload: {e}", file=sys.stderr)
        sys.stdout.write("".join(lines))
        return 1
    sys.stdout.write("".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
