#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""lxcload: LXC's device hot-plug, timed in one process.

    lxcload.py -P LXCPATH -n N NAME NODE

Runs N cycles of liblxc's add_device_node(NODE) then
remove_device_node(NODE) on the running container NAME, the calls that
`lxc-device add` and `lxc-device del` make, without a process start per
call. NODE must exist on the host at the path it is to have in the
container (liblxc checks it). Prints one line per call:
    add <ns>     or     del <ns>
Exits 1 at the first call that fails. Needs the python3 that has the lxc
module (Debian's python3-lxc), run where the container's lxc-* commands
run (the same mount namespace).
"""
import argparse
import sys
import time

import lxc


def main():
    p = argparse.ArgumentParser(prog="lxcload.py")
    p.add_argument("-P", dest="lxcpath", required=True)
    p.add_argument("-n", dest="cycles", type=int, default=200)
    p.add_argument("name")
    p.add_argument("node")
    a = p.parse_args()

    c = lxc.Container(a.name, a.lxcpath)
    if not c.running:
        print(f"lxcload: container '{a.name}' is not running", file=sys.stderr)
        return 1
    clock = time.perf_counter_ns
    lines = []
    for _ in range(a.cycles):
        for kind, call in (("add", c.add_device_node), ("del", c.remove_device_node)):
            t0 = clock()
            ok = call(a.node)
            took = clock() - t0
            if not ok:
                print(f"lxcload: {kind} of '{a.node}' failed", file=sys.stderr)
                sys.stdout.write("".join(lines))
                return 1
            lines.append(f"{kind} {took}\n")
    sys.stdout.write("".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
