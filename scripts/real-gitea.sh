#!/usr/bin/env bash
# real-gitea.sh: build Gitea from the Go module proxy and run a throw-away
# instance on loopback for the opt-in real-server tests (TestRealForgejo,
# TestServeForgejoReal, TestGitForgejoReal). Run as root on a scratch
# machine: it creates a user "gitea" (Gitea refuses to run as root), a
# server on 127.0.0.1:13000 with SQLite and the channel queue, an admin
# user and an access token, and prints the variables to export.
#
#   bash scripts/real-gitea.sh            # build (about 15 minutes on 2 cores, once) and start
#   eval "$(bash scripts/real-gitea.sh --env)"
#   go test -race -run 'TestRealForgejo|TestServeForgejoReal|TestGitForgejoReal' ./...
set -euo pipefail
version=${GITEA_VERSION:-v1.26.0}
home=${GITEA_HOME:-/home/gitea}
work=$home/g
port=${GITEA_PORT:-13000}
if [ "${1:-}" = "--env" ]; then
	echo "export TOOLAGENT_TEST_FORGEJO_URL=http://127.0.0.1:$port"
	echo "export TOOLAGENT_TEST_FORGEJO_TOKEN=$(cat "$home/token")"
	exit 0
fi
id gitea >/dev/null 2>&1 || useradd -m -s /bin/bash gitea
mkdir -p "$home"
src=$(mktemp -d)
go mod download -json "code.gitea.io/gitea@$version" >/dev/null
cp -r "$(go env GOMODCACHE)/code.gitea.io/gitea@$version/." "$src"
chmod -R u+w "$src"
(cd "$src" && go build -tags 'sqlite sqlite_unlock_notify' -ldflags "-X main.Version=${version#v}" -o "$home/gitea" .)
mkdir -p "$work/custom/conf" "$work/data" "$work/public"
cp -r "$src/options" "$work/"
rm -rf "$src"
cat > "$work/custom/conf/app.ini" <<INI
APP_NAME = toolagent-test
RUN_MODE = prod
WORK_PATH = $work
[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = $port
ROOT_URL = http://127.0.0.1:$port/
DISABLE_SSH = true
OFFLINE_MODE = true
[database]
DB_TYPE = sqlite3
PATH = $work/data/gitea.db
[security]
INSTALL_LOCK = true
SECRET_KEY = $(head -c 24 /dev/urandom | base64 | tr -d '/+=')
[service]
DISABLE_REGISTRATION = true
[webhook]
ALLOWED_HOST_LIST = loopback,private
[queue]
TYPE = channel
[log]
LEVEL = Warn
INI
chown -R gitea:gitea "$home"
g() { su gitea -c "cd $home && ./gitea --config $work/custom/conf/app.ini --work-path $work $*"; }
g migrate >/dev/null
g admin user create --admin --username tester --password "'$(head -c 18 /dev/urandom | base64 | tr -d '/+=')Aa1-'" --email tester@example.com --must-change-password=false >/dev/null
su gitea -c "cd $home && nohup ./gitea --config $work/custom/conf/app.ini --work-path $work web > $home/web.log 2>&1 &"
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/api/v1/version" >/dev/null && break; sleep 1; done
g admin user generate-access-token --username tester --token-name "t$(date +%s)" --scopes all --raw | tail -1 > "$home/token"
chmod 600 "$home/token"
echo "Gitea $version on http://127.0.0.1:$port; now: eval \"\$(bash $0 --env)\""
