#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds devgate's .deb with dpkg-deb from what 'make install' puts in a
# staging root; 'make deb' runs it. Depends come from dpkg-shlibdeps, so they
# follow the libraries the binaries really link.
#
# usage: packaging/mkdeb.sh BUILD_DIR VERSION     (from the source tree)
set -eu

O=$1
VERSION=$2
ARCH=$(dpkg --print-architecture)
work=$O/deb
root=$work/debian/devgate
deb=$O/devgate_${VERSION}_$ARCH.deb

rm -rf "$work"
mkdir -p "$root/DEBIAN"
make --no-print-directory -s install O="$O" DESTDIR="$root" PREFIX=/usr
# Shipped stripped, as Debian policy asks; the build tree keeps debug info.
for b in usr/sbin/devgated usr/sbin/devgate-k8s usr/bin/devgatectl usr/bin/devgate-hook; do
	strip --strip-unneeded --remove-section=.comment "$root/$b"
done
install -D -m 0644 packaging/debian/copyright "$root/usr/share/doc/devgate/copyright"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm \
	"$root/DEBIAN/"
# Every file under /etc is a conffile: dpkg keeps the admin's changes.
(cd "$root" && find etc -type f | sed 's|^|/|') >"$root/DEBIAN/conffiles"

# dpkg-shlibdeps wants a debian/control to read; a minimal one will do.
printf 'Source: devgate\n\nPackage: devgate\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/devgate/usr/sbin/devgated \
	debian/devgate/usr/sbin/devgate-k8s debian/devgate/usr/bin/devgatectl |
	sed -n 's/^shlibs:Depends=//p')
# devgate-hook is linked statically (see the Makefile): name what went into it.
built_using=
if ! readelf -d "$root/usr/bin/devgate-hook" | grep -q NEEDED; then
	built_using=$(dpkg-query -W -f='${source:Package} (= ${source:Version}), ' \
		libc6-dev libjson-c-dev libcap-dev libseccomp-dev)
	built_using="Built-Using: ${built_using%, }"
fi
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)

cat >"$root/DEBIAN/control" <<EOF
Package: devgate
Version: $VERSION
Architecture: $ARCH
Maintainer: devgate developers <devgate@invalid>
Installed-Size: $size
Depends: $depends
${built_using:+$built_using
}Suggests: jq, bash-completion
Section: admin
Priority: optional
Description: grant GPUs to running containers and take them back
 devgated creates NVIDIA device nodes inside a running container and allows
 them through a cgroup v2 BPF device program placed in front of the
 runtime's own, so a container gains or loses GPUs without a restart.
 devgatectl is its command line; 'devgatectl doctor' checks a host for what
 devgate needs. devgate-hook is the OCI hook container runtimes run, also
 through the generated CDI spec and the shipped hooks.d file. devgate-k8s
 is the Kubernetes device plugin (DaemonSet in /usr/share/devgate/k8s).
EOF
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
rm -rf "$work"
echo "$deb"
