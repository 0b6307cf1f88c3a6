#!/usr/bin/env bash
# version.sh: the version of this checkout as a release names it, from
# git describe: vX.Y.Z at a tag, vX.Y.Z-N-gSHA N commits after it, and
# v0.0.0-N-gSHA before the first tag (N: the commits in the history, SHA:
# the head's abbreviated id), with -dirty when tracked files are
# changed. No tag is needed.
#
#   scripts/version.sh            print the version
#   scripts/version.sh --ldflags  print the go build -ldflags that put it
#                                 in the binary (toolagent version prints it)
set -euo pipefail

if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "version.sh: not in a git checkout: the version comes from git describe" >&2
	exit 1
fi
git update-index -q --refresh >/dev/null 2>&1 || true
if ! v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 --dirty 2>/dev/null); then
	v="v0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short=12 HEAD)"
	git diff-index --quiet HEAD -- || v+="-dirty"
fi

case "${1:-}" in
"") echo "$v" ;;
--ldflags) echo "-X github.com/toolagent/toolagent/internal/daemon.version=$v" ;;
*)
	echo "usage: scripts/version.sh [--ldflags]" >&2
	exit 2
	;;
esac
