#!/usr/bin/env bash
# release-check.sh DIR: check a release scripts/release.sh built in DIR:
# SHA256SUMS holds every tarball and .deb and matches them; each tarball
# holds the binary for its architecture, built -trimpath (go version -m)
# with the version of its name in it (the host's own architecture's binary
# is run: `toolagent version`); each .deb is
# package toolagent of that architecture, depends on bubblewrap and git,
# installs /usr/bin/toolagent, the systemd unit and the config as a
# conffile, and has the maintainer scripts that make and remove the
# toolagent user. Exit 1 naming the first thing that is wrong.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: scripts/release-check.sh DIR" >&2
	exit 2
fi
dir=$(cd "$1" && pwd)
fail() {
	echo "release-check: $*" >&2
	exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -f "$dir/SHA256SUMS" ] || fail "$dir/SHA256SUMS is missing"
(cd "$dir" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match the files"
shopt -s nullglob
tars=("$dir"/toolagent_v*_linux_*.tar.gz)
debs=("$dir"/toolagent_*.deb)
[ ${#tars[@]} -ge 1 ] || fail "no tarball in $dir"
[ ${#debs[@]} -ge 1 ] || fail "no .deb in $dir"
for f in "${tars[@]}" "${debs[@]}"; do
	grep -q " $(basename "$f")\$" "$dir/SHA256SUMS" || fail "SHA256SUMS does not list $(basename "$f")"
done

hostarch=$(go env GOARCH)
for t in "${tars[@]}"; do
	name=$(basename "$t" .tar.gz)
	arch=${name##*_linux_}
	version=${name#toolagent_}
	version=${version%_linux_*}
	tar -xzf "$t" -C "$work"
	bin=$work/$name/toolagent
	[ -x "$bin" ] || fail "$name.tar.gz holds no $name/toolagent"
	for f in README.md CHANGELOG.md LICENSE toolagent.service toolagent.yaml.example; do
		[ -f "$work/$name/$f" ] || fail "$name.tar.gz holds no $f"
	done
	info=$(go version -m "$bin")
	grep -q "GOARCH=$arch\$" <<<"$info" || fail "$name: the binary is not GOARCH=$arch"
	grep -q -- "-trimpath=true" <<<"$info" || fail "$name: the binary was not built -trimpath"
	# -trimpath keeps -ldflags out of the build info: look for the string.
	grep -q -a -F "$version" "$bin" || fail "$name: the binary does not hold its version $version"
	if [ "$arch" = "$hostarch" ]; then
		got=$("$bin" version)
		[ "$got" = "toolagent $version" ] || fail "$name: toolagent version says \"$got\"; want \"toolagent $version\""
	fi
	echo "ok  $(basename "$t"): linux/$arch, -trimpath, version $version"
done

for d in "${debs[@]}"; do
	b=$(basename "$d")
	[ "$(dpkg-deb -f "$d" Package)" = toolagent ] || fail "$b: Package is not toolagent"
	arch=$(dpkg-deb -f "$d" Architecture)
	[[ $b == *_"$arch".deb ]] || fail "$b: Architecture $arch does not match the file name"
	deps=$(dpkg-deb -f "$d" Depends)
	for p in bubblewrap git; do
		grep -qw "$p" <<<"$deps" || fail "$b: Depends ($deps) lacks $p"
	done
	files=$(dpkg-deb -c "$d")
	for p in ./usr/bin/toolagent ./lib/systemd/system/toolagent.service ./etc/toolagent/toolagent.yaml; do
		grep -q " $p\$" <<<"$files" || fail "$b: does not install ${p#.}"
	done
	rm -rf "$work/ctl" && mkdir "$work/ctl" && dpkg-deb -e "$d" "$work/ctl"
	grep -qx /etc/toolagent/toolagent.yaml "$work/ctl/conffiles" || fail "$b: /etc/toolagent/toolagent.yaml is not a conffile"
	grep -q "useradd --system" "$work/ctl/postinst" || fail "$b: postinst does not make the toolagent user"
	grep -q "rm -rf /var/lib/toolagent" "$work/ctl/postrm" || fail "$b: postrm does not purge the state"
	echo "ok  $b: $arch, Version $(dpkg-deb -f "$d" Version), Depends $deps"
done
echo "release-check: $dir is a whole release"
