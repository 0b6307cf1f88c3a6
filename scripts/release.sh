#!/usr/bin/env bash
# release.sh DIR: build a release of this checkout into DIR:
#   toolagent_VERSION_linux_amd64.tar.gz, toolagent_VERSION_linux_arm64.tar.gz
#       the binary (static, -trimpath, its version from git describe put
#       in by -ldflags: `toolagent version` prints it), README.md,
#       CHANGELOG.md, LICENSE, the systemd unit and the example config;
#   toolagent_DEBVERSION-1_ARCH.deb for both architectures (nfpm,
#       packaging/nfpm.yaml): /usr/bin/toolagent, the systemd unit, the
#       config /etc/toolagent/toolagent.yaml, a system user toolagent and
#       its state directory /var/lib/toolagent; depends on bubblewrap, git;
#   SHA256SUMS of all of them.
# VERSION is scripts/version.sh's: vX.Y.Z[-N-gSHA], or v0.0.0-N-gSHA
# before the first tag (no tag is needed). The Debian version is the same
# without the v and with + for the first -: 0.3.0+5.gSHA sorts after 0.3.0.
#
# Environment: RELEASE_ARCHES (default "amd64 arm64"); NFPM, an nfpm
# binary to use instead of building the pinned one (NFPM_VERSION) into a
# temporary GOBIN. scripts/release-check.sh DIR checks the result.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ]; then
	echo "usage: scripts/release.sh DIR" >&2
	exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
arches=${RELEASE_ARCHES:-amd64 arm64}
nfpm_version=${NFPM_VERSION:-v2.48.0}

version=$(scripts/version.sh)
ldflags="-s -w $(scripts/version.sh --ldflags)"
debversion=${version#v}
debversion=${debversion/-/+}
debversion=${debversion//-/.}
# Reproducible archives: every file dated at the head commit.
epoch=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH=$epoch

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nfpm=${NFPM:-}
if [ -z "$nfpm" ]; then
	echo "== nfpm $nfpm_version"
	GOBIN="$work/bin" GOFLAGS= go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$nfpm_version"
	nfpm=$work/bin/nfpm
fi

for arch in $arches; do
	name=toolagent_${version}_linux_${arch}
	echo "== $name"
	stage=$work/$name
	mkdir -p "$stage"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$stage/toolagent" ./cmd/toolagent
	cp README.md CHANGELOG.md LICENSE packaging/toolagent.service "$stage/"
	cp examples/toolagent.yaml "$stage/toolagent.yaml.example"
	find "$stage" -exec touch -h -d "@$epoch" {} +
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$work" -cf - "$name" |
		gzip -n -9 >"$out/$name.tar.gz"

	deb=$work/deb-$arch
	mkdir -p "$deb"
	cp "$stage/toolagent" README.md CHANGELOG.md LICENSE packaging/nfpm.yaml packaging/toolagent.service \
		packaging/toolagent.yaml packaging/postinst packaging/prerm packaging/postrm "$deb/"
	cp examples/toolagent.yaml "$deb/toolagent.yaml.example"
	(cd "$deb" && ARCH=$arch DEB_VERSION=$debversion "$nfpm" package --config nfpm.yaml --packager deb --target "$out/")
done

(cd "$out" && rm -f SHA256SUMS && sha256sum -- *.tar.gz *.deb >SHA256SUMS)
echo "== $out"
(cd "$out" && ls -l)
