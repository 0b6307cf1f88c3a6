package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The option grammars of the programs the policy lets run (opts in
// options.go). Each lists the options the policy knows, with whether they
// take a value and, for the dangerous ones, what they do; an option not
// listed makes the command unknown, so a read verdict is only given for
// options known to be harmless.

// closedReads have no option that writes a file, runs a program or
// changes the system (checked for each, in its GNU/procps/util-linux
// form): any option they are given only changes what they read or how
// they print.
var closedReads = []string{"ls", "dir", "vdir", "cat", "tac", "head", "tail", "grep", "egrep", "fgrep", "zgrep",
	"echo", "pwd", "whoami", "id", "groups", "uname", "df", "du", "free", "uptime", "ps", "pgrep", "pidof",
	"pstree", "wc", "tr", "stat", "which", "whereis", "type", "true", "false", ":", "basename", "dirname",
	"realpath", "readlink", "seq", "sleep", "nl", "od", "hexdump", "strings", "md5sum", "sha1sum", "sha256sum",
	"sha512sum", "cksum", "b2sum", "base64", "base32", "cmp", "diff", "comm", "paste", "join", "fold", "fmt",
	"column", "expand", "unexpand", "rev", "jq", "nproc", "lscpu", "lsblk", "lsmod", "lspci", "lsusb", "lsof",
	"findmnt", "vmstat", "iostat", "mpstat", "w", "who", "last", "users", "logname", "getent", "tty", "locale",
	"printenv", "cal", "expr", "factor", "numfmt", "getconf", "arch", "lsb_release", "cd", "pushd", "popd",
	"dirs", "shift", "shopt", "return", "exit", "break", "continue", "umask", "ulimit", "times", "jobs", "yes",
	"netstat", "sync", "top", "htop", "sum", "tsort", "pr", "look"}

var (
	sortSpec = opts(`-b -c -C -d -f -g -h -i -M -m -n -R -r -s -u -V -z -k: -t: -S: -T: -o:!write
		--ignore-leading-blanks --check=? --dictionary-order --ignore-case --general-numeric-sort
		--human-numeric-sort --ignore-nonprinting --month-sort --merge --numeric-sort --random-sort
		--random-source= --reverse --stable --unique --version-sort --zero-terminated --key=
		--field-separator= --buffer-size= --temporary-directory= --output=!write --compress-program=!exec
		--batch-size= --debug --files0-from= --parallel= --sort= --help --version`)
	uniqSpec = opts(`-c -d -D:: -f: -i -s: -u -w: -z --count --repeated --all-repeated=? --skip-fields=
		--skip-chars= --unique --group=? --ignore-case --check-chars= --zero-terminated --help --version`)
	cutSpec = opts(`-b: -c: -d: -f: -n -s -z --bytes= --characters= --delimiter= --fields= --complement
		--only-delimited --output-delimiter= --zero-terminated --help --version`)
	teeSpec   = opts(`-a -i -p --append --ignore-interrupts --output-error=? --help --version`)
	iconvSpec = opts(`-c -f: -t: -l -o:!write -s --from-code= --to-code= --list --output=!write --silent
		--verbose --help --version --usage`)
	dateSpec = opts(`-d: -f: -I:: -r: -R -s:!system -u --date= --debug --file= --iso-8601=? --resolution
		--rfc-email --rfc-3339= --reference= --set=!system --universal --utc --help --version`)
	hostnameSpec = opts(`-a -A -b!system -d -f -F:!system -i -I -s -y --alias --all-fqdns --boot!system
		--domain --fqdn --long --file=!system --ip-address --all-ip-addresses --short --yp --nis --help --version`)
	fileSpec = opts(`-b -c -C!write -d -E -e: -F: -f: -h -i -k -l -L -m: -N -n -p!write -P: -r -s -S -v -z -Z -0
		--brief --checking-printout --compile!write --debug --exclude= --exclude-quiet= --separator=
		--files-from= --no-dereference --mime --mime-type --mime-encoding --keep-going --list --dereference
		--magic-file= --no-pad --no-buffer --preserve-date!write --parameter= --raw --special-files
		--no-sandbox --uncompress --uncompress-noreport --print0 --apple --extension --help --version`)
	dmesgSpec = opts(`-C!system -c!system -D!system -E!system -n:!system -F: -f: -H -k -L:: -l: -P -p -r -S
		-s: -T -t -u -w -W -x -d -e -J -h -V --clear!system --read-clear!system --console-off!system
		--console-on!system --console-level=!system --file= --facility= --human --kernel --color=?
		--level= --nopager --force-prefix --raw --syslog --buffer-size= --ctime --notime --userspace
		--follow --follow-new --decode --show-delta --reltime --time-format= --since= --until= --json
		--noescape --help --version`)
	journalctlSpec = opts(`-u: -n:: -f -b:: -k -e -r -o: -x -q -p: -S: -U: -g: -t: -T: -M: -D: -a -l -m
		-c: -F: -N -i: -h --unit= --user-unit= --lines=? --follow --boot=? --dmesg --pager-end --reverse
		--output= --catalog --quiet --priority= --since= --until= --grep= --case-sensitive=?
		--identifier= --exclude-identifier= --user --system --machine= --directory= --file= --root=
		--image= --namespace= --no-pager --all --full --no-full --merge --utc --no-hostname
		--output-fields= --cursor= --after-cursor= --show-cursor --list-boots --field= --fields
		--disk-usage --header --list-catalog --dump-catalog --verify --facility= --invocation= --no-tail
		--help --version --cursor-file=!write --vacuum-size=!write --vacuum-time=!write
		--vacuum-files=!write --rotate!write --flush!write --sync!write --relinquish-var!write
		--smart-relinquish-var!write --setup-keys!write --update-catalog!write --force!write
		--verify-key=`).with("numeric")
	ssSpec = opts(`-h -V -H -n -r -a -l -o -e -m -p -i -K!process -s -E -Z -z -b -4 -6 -0 -t -S -u -d -w -x
		-M -O -T -N: -f: -A: -D:!write -F: --help --version --no-header --numeric --resolve --all
		--listening --options --extended --memory --processes --threads --info --tos --cgroup
		--tipcinfo --kill!process --summary --events --context --contexts --net= --bpf --ipv4 --ipv6
		--packet --tcp --sctp --udp --dccp --raw --unix --mptcp --vsock --tipc --xdp --family=
		--query= --socket= --diag=!write --filter= --oneline --bpf-maps --bpf-map-id= --inet-sockets`)
	lessSpec = opts(`-? -a -A -b: -B -c -C -d -e -E -f -F -g -G -h: -i -I -j: -J -k:!exec -K -L -m -M -n -N
		-o:!write -O:!write -p: -P: -q -Q -r -R -s -S -t: -T: -u -U -V -w -W -x: -X -y: -z: -#:
		--quit-if-one-screen --no-init --RAW-CONTROL-CHARS --raw-control-chars --chop-long-lines
		--LINE-NUMBERS --line-numbers --ignore-case --IGNORE-CASE --squeeze-blank-lines --tabs=
		--log-file=!write --LOG-FILE=!write --lesskey-file=!exec --lesskey-src=!exec
		--lesskey-content=!exec --no-lessopen --mouse --use-color --quiet --silent --pattern=
		--prompt= --tag= --tag-file= --window= --shift= --jump-target= --header= --incsearch
		--wordwrap --follow-name --help --version`)
	moreSpec = opts(`-d -f -l -c -p -s -u -e -n: --silent --logical --no-pause --print-over --clean-print
		--squeeze --plain --exit-on-eof --lines= --help --version`).with("numeric")
	treeSpec = opts(`-a -d -l -f -x -L: -R!write -P: -I: -o:!write -i -A -S -n -C -J -X -p -u -g -s -h -D -F
		-v -t -c -U -r -q -N -Q -H: -T: --gitignore --gitfile= --ignore-case --matchdirs --metafirst
		--prune --info --infofile= --noreport --charset= --filelimit= --si --du --timefmt= --inodes
		--device --dirsfirst --filesfirst --sort= --fromfile --fromtabfile --fflinks --nolinks
		--hyperlink --hintro= --houtro= --help --version`)
	rgSpec = opts(`-A: -B: -C: -c -e: -E: -f: -F -g: -H -i -I -j: -l -L -m: -M: -n -N -o -p -q -r: -s -S
		-t: -T: -u -U -v -V -w -x -z -0 -a -b --after-context= --before-context= --context= --count
		--count-matches --regexp= --encoding= --file= --fixed-strings --glob= --iglob= --with-filename
		--no-filename --ignore-case --no-ignore-dot --line-number --no-line-number --only-matching
		--pretty --quiet --replace= --case-sensitive --smart-case --type= --type-not= --type-list
		--unrestricted --multiline --invert-match --word-regexp --line-regexp --search-zip --null
		--text --byte-offset --hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-messages
		--files --files-with-matches --files-without-match --json --vimgrep --heading --no-heading
		--column --color= --colors= --sort= --sortr= --max-count= --max-columns= --max-depth=
		--max-filesize= --follow --threads= --trim --stats --debug --passthru --null-data
		--one-file-system --no-config --engine= --pcre2 --auto-hybrid-regex --crlf --help --version
		--pre=!exec --hostname-bin=!exec --pre-glob=`)
	dmidecodeSpec = opts(`-d: -h -q -s: -t: -H: -u -V --dev-mem= --help --quiet --string= --type= --handle=
		--dump --dump-bin=!write --from-dump= --no-sysfs --no-quirks --oem-string= --version`)
	blkidSpec = opts(`-c:!write -d -g!write -h -i -k -l -L: -n: -o: -O: -p -s: -S: -t: -u: -U: -V -w:!write
		--cache-file=!write --no-encoding --garbage-collect!write --output= --help --info --list-filesystems
		--list-one --label= --match-types= --offset= --probe --match-tag= --size= --match-token=
		--usages= --uuid= --version`)
	gzipSpec = opts(`-a -c -d -f -h -k -l -L -n -N -q -r -S: -t -v -V --ascii --stdout --to-stdout
		--decompress --uncompress --force --help --keep --list --license --no-name --name --quiet
		--recursive --rsyncable --suffix= --synchronous --test --verbose --version --fast --best`).with("numeric")
	bzip2Spec = opts(`-c -d -z -k -f -t -s -q -v -L -V -h --stdout --decompress --compress --keep --force
		--test --small --quiet --verbose --license --version --help --fast --best`).with("numeric")
	xzSpec = opts(`-z -d -t -l -k -f -c -e -T: -F: -C: -M: -q -v -h -H -V -S: -Q --compress --decompress
		--uncompress --test --list --keep --force --stdout --to-stdout --suffix= --files= --files0=?
		--format= --check= --ignore-check --extreme --threads= --memlimit= --memory=
		--memlimit-compress= --memlimit-decompress= --no-adjust --quiet --verbose --robot
		--info-memory --help --long-help --version --single-stream --no-sparse --block-size=
		--block-list= --no-warn`).with("numeric")
	zstdSpec = opts(`-z -d -D: -o:!write -f -c -k -q -v -l -t -T: -r -h -H -V -M: --ultra --fast=?
		--rm!delete --keep --stdout --force --test --list --quiet --verbose --threads= --decompress
		--compress --uncompress --output-dir-flat=!write --output-dir-mirror=!write --memory= --long=?
		--no-progress --progress --sparse --no-sparse --format= --exclude-compressed --adapt=?
		--rsyncable --size-hint= --patch-from= --stream-size= --no-check --check --content-size
		--no-content-size --help --version --filelist= --single-thread --auto-threads=
		--train!write --pass-through --no-pass-through`).with("numeric")
	lz4Spec = opts(`-z -d -D: -c -t -f -k -m -r -l -v -q -h -H -V -B: --fast=? --best --no-frame-crc
		--content-size --sparse --no-sparse --favor-decSpeed --stdout --to-stdout --decompress
		--uncompress --compress --test --force --keep --multiple --list --verbose --quiet
		--rm!delete --help --version`).with("numeric")
	xxdSpec = opts(`-a -b -C -c: -E -e -g: -h -i -l: -n: -o: -p -r -R: -s: -u -v -d --autoskip --bits
		--capitalize --cols= --EBCDIC --groupsize= --help --include --len= --name= --offset= --ps
		--postscript --plain --revert --seek= --version`).with("dashLong")
	printfSpec = opts(`-v:`).with("inOrder")
	readSpec   = opts(`-a: -d: -e -E -i: -n: -N: -p: -r -s -t: -u:`)
)

// tarSpec: tar lists an archive with -t; the options that run programs
// or write other files than the archive are marked.
var tarSpec = opts(`-A -c -d -r -t -u -x -a -b: -B -C: -f: -F:!exec -g:!write -G -h -H: -i -I:!exec -j -J
	-k -K: -l -L: -m -M -N: -o -O -p -P -R -s -S -T: -U -v -V: -w -W -X: -z -Z
	--append --create --diff --compare --delete --list --update --extract --get --catenate
	--concatenate --test-label --file= --directory= --files-from= --exclude= --exclude-from=
	--exclude-vcs --exclude-vcs-ignores --exclude-backups --exclude-caches --exclude-caches-all
	--exclude-caches-under --exclude-tag= --exclude-tag-all= --exclude-tag-under= --exclude-ignore=
	--exclude-ignore-recursive= --gzip --gunzip --ungzip --bzip2 --xz --lzma --lzip --lzop --zstd
	--compress --uncompress --auto-compress --no-auto-compress --use-compress-program=!exec
	--verbose --verify --to-stdout --to-command=!exec --checkpoint=? --checkpoint-action=!exec
	--totals=? --wildcards --no-wildcards --anchored --no-anchored --ignore-case --no-ignore-case
	--wildcards-match-slash --no-wildcards-match-slash --strip-components= --transform= --xform=
	--show-transformed-names --show-stored-names --numeric-owner --same-owner --no-same-owner
	--preserve-permissions --same-permissions --no-same-permissions --preserve-order --same-order
	--keep-old-files --keep-newer-files --keep-directory-symlink --skip-old-files --overwrite
	--overwrite-dir --no-overwrite-dir --unlink-first --recursive-unlink --remove-files
	--absolute-names --dereference --hard-dereference --one-file-system --one-top-level=? --sparse
	--sparse-version= --format= --posix --old-archive --portability --blocking-factor=
	--record-size= --ignore-zeros --ignore-failed-read --index-file=!write --info-script=!exec
	--new-volume-script=!exec --multi-volume --tape-length= --volno-file=!write
	--listed-incremental=!write --incremental --level= --label= --rsh-command=!exec
	--rmt-command=!exec --force-local --null --no-null --unquote --no-unquote --quoting-style=
	--quote-chars= --no-quote-chars= --utc --full-time --block-number --check-links --occurrence=?
	--mode= --mtime= --owner= --group= --owner-map= --group-map= --newer= --newer-mtime=
	--after-date= --sort= --acls --no-acls --selinux --no-selinux --xattrs --no-xattrs
	--xattrs-include= --xattrs-exclude= --warning= --interactive --confirmation --help --usage
	--version --show-defaults --restrict --backup=? --suffix= --delay-directory-restore
	--no-delay-directory-restore --no-recursion --recursion --seek --no-seek --hole-detection=
	--starting-file= --preserve --touch --ignore-command-error --no-ignore-command-error
	--add-file= --verbatim-files-from --no-verbatim-files-from --check-device --no-check-device
	--clamp-mtime --pax-option= --set-mtime-command=!exec --set-mtime-format= --lzip --zstd`)

// sedSpec: GNU sed.
var sedSpec = opts(`-n -e: -f:!exec -E -r -i::!write -l: -s -z -u -b --quiet --silent --debug --expression=
	--file=!exec --regexp-extended --in-place=?!write --line-length= --null-data --zero-terminated
	--separate --unbuffered --binary --posix --follow-symlinks --sandbox --help --version`)

// awkSpec: gawk, mawk and the one true awk; mawk's -W words are listed as
// long options, since -W NAME is read as --NAME.
var awkSpec = opts(`-f:!exec -F: -v: -b -c -C -d::!write -D::!exec -e: -E:!exec -g -h -i:!exec -I -k -l:!exec
	-L:: -M -N -n -o::!write -O -p::!write -P -r -s -S -t -V -W: --file=!exec --field-separator=
	--assign= --characters-as-bytes --traditional --copyright --dump-variables=?!write --debug=?!exec
	--source= --exec=!exec --gen-pot --help --include=!exec --trace --csv --load=!exec --lint=?
	--bignum --use-lc-numeric --non-decimal-data --pretty-print=?!write --optimize --profile=?!write
	--posix --re-interval --no-optimize --sandbox --lint-old --version --interactive --dump
	--posix_space --usage --random= --sprintf=`).with("inOrder")

// gitSpec: git's own options, before the subcommand.
var gitSpec = opts(`-v -h -C: -c:!exec -p -P --version --help --exec-path=?!exec --html-path --man-path
	--info-path --paginate --no-pager --no-replace-objects --no-lazy-fetch --no-optional-locks
	--no-advice --bare --git-dir= --work-tree= --namespace= --super-prefix= --config-env=!exec
	--literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --list-cmds=
	--attr-source=`).with("inOrder")

// gitSubDanger are the options of git subcommands that write files or run
// programs; git accepts unique prefixes of long options, so a prefix of one
// of these counts as it. Everything else a read-only subcommand is given
// only selects or formats what it shows.
var gitSubDanger = opts(`--output=!write --ext-diff!exec --upload-pack=!exec --receive-pack=!exec
	--exec=!exec --open-files-in-pager=?!exec --web!exec --browser=!exec --man!exec --info!exec
	--lost-found!write --edit!exec`).with("open")

// shellSpec: bash (and the POSIX shells, whose options are a subset).
var shellSpec = opts(`-a -b -B -c -C -e -E -f -h -H -i!exec -k!environment -l!exec -m -n -o: -O: -p -P -r
	-s -t -T -u -v -x -D --debug --debugger!exec --dump-po-strings --dump-strings --help
	--init-file=!exec --rcfile=!exec --login!exec --noediting --noprofile --norc --posix
	--pretty-print --restricted --verbose --version`).with("inOrder,plus")

// Wrappers: what they run is judged as a command.
var (
	nohupSpec    = opts(``).with("inOrder")
	setsidSpec   = opts(`-c -f -w --ctty --fork --wait`).with("inOrder")
	timeSpec     = opts(`-a -f: -o:!write -p -q -v -V --append --format= --output=!write --portability --quiet --verbose --help --version`).with("inOrder")
	unbufferSpec = opts(`-p`).with("inOrder")
	chronicSpec  = opts(`-e -v`).with("inOrder")
	niceSpec     = opts(`-n: --adjustment= --help --version`).with("inOrder,numeric")
	ioniceSpec   = opts(`-c: -n: -p:!process -P:!process -u:!process -t --class= --classdata= --pid=!process
		--pgid=!process --uid=!process --ignore --help --version`).with("inOrder")
	timeoutSpec = opts(`-k: -s: -v -p -f --kill-after= --signal= --verbose --preserve-status --foreground --help --version`).with("inOrder")
	stdbufSpec  = opts(`-i: -o: -e: --input= --output= --error= --help --version`).with("inOrder")
	tasksetSpec = opts(`-a -p -c --all-tasks --pid --cpu-list --help --version`).with("inOrder")
	chrtSpec    = opts(`-a -b -d -e -f -i -m -o -p -r -R -v -T: -P: -D: --all-tasks --batch --deadline --ext
		--fifo --idle --max --other --pid --rr --reset-on-fork --verbose --sched-runtime= --sched-period=
		--sched-deadline= --help --version`).with("inOrder")
	sudoSpec = opts(`-A -b -E -e -H -i -K -k -l -n -P -S -s -V -v -B -N -R: -C: -D: -g: -h:: -p: -r: -t: -T: -U: -u:
		--askpass --background --bell --preserve-env=? --edit --help --set-home --login --remove-timestamp
		--reset-timestamp --list --non-interactive --preserve-groups --stdin --shell --validate --version
		--close-from= --chdir= --group= --host= --prompt= --chroot= --role= --type= --command-timeout=
		--other-user= --user=`).with("inOrder")
	doasSpec    = opts(`-L -n -s -C: -u:`).with("inOrder")
	commandSpec = opts(`-p -v -V`).with("inOrder")
	execSpec    = opts(`-a: -c -l`).with("inOrder")
	flockSpec   = opts(`-s -x -e -u -n -w: -E: -o -c: -F --shared --exclusive --unlock --nonblock --nb
		--timeout= --wait= --conflict-exit-code= --close --command= --no-fork --verbose --help --version`).with("inOrder")
	chrootSpec  = opts(`--userspec= --groups= --skip-chdir --help --version`).with("inOrder")
	unshareSpec = opts(`-m:: -u:: -i:: -n:: -p:: -U:: -C:: -T:: -f -r -c -R: -w: -S: -G: -l: --mount=? --uts=?
		--ipc=? --net=? --pid=? --user=? --cgroup=? --time=? --fork --map-root-user --map-current-user
		--map-user= --map-group= --map-users= --map-groups= --map-auto --kill-child=? --mount-proc=?
		--mount-binfmt=? --propagation= --setgroups= --keep-caps --root= --wd= --setuid= --setgid=
		--monotonic= --boottime= --load-interp= --help --version`).with("inOrder")
	nsenterSpec = opts(`-a -t: -m:: -u:: -i:: -n:: -p:: -U:: -C:: -T:: -S: -G: -r:: -w:: -W: -F -e -c --all
		--target= --mount=? --uts=? --ipc=? --net=? --pid=? --cgroup=? --user=? --time=? --setuid=
		--setgid= --preserve-credentials --root=? --wd=? --wdns= --no-fork --env --join-cgroup
		--user-parent --keep-caps --help --version`).with("inOrder")
	watchSpec = opts(`-b -c -C -d:: -e -f -g -n: -p -q: -r -s:!write -t -w -x --beep --color --no-color
		--differences=? --errexit --follow --chgexit --interval= --precise --no-rerun --no-title
		--no-wrap --exec --equexit= --shotsdir=!write --help --version`).with("inOrder")
	envSpec = opts(`-i -0 -u: -C: -S:!dynamic -v --ignore-environment --null --unset= --chdir=
		--split-string=!dynamic --debug --block-signal=? --default-signal=? --ignore-signal=?
		--list-signal-handling --help --version`).with("inOrder")
	xargsSpec = opts(`-0 -a: -d: -E: -e:: -I: -i:: -L: -l:: -n: -P: -p -r -s: -t -x -o --null --arg-file=
		--delimiter= --eof=? --replace=? --max-lines=? --max-args= --max-procs= --interactive
		--no-run-if-empty --max-chars= --verbose --exit --process-slot-var= --open-tty --show-limits
		--help --version`).with("inOrder")
)

// wrap is a wrapper: after its options (s, which must be inOrder) and skip
// operands comes the command it runs, judged as a command. self is the
// class of the wrapper itself ("" for none).
func wrap(self Class, selfPhrase string, s *optSpec, skip int) classifier {
	return func(c *call) {
		if self != "" {
			c.add(self, selfPhrase)
		}
		p := c.parse(s)
		if len(p.operands) > skip {
			c.inner(p.operands[skip:], c.stdin)
		}
	}
}

// wrappers lists the wrappers judged by wrap.
func wrappers(set func(classifier, ...string)) {
	set(wrap("", "", nohupSpec, 0), "nohup", "builtin", "catchsegv")
	set(wrap("", "", setsidSpec, 0), "setsid")
	set(wrap("", "", timeSpec, 0), "time")
	set(wrap("", "", unbufferSpec, 0), "unbuffer")
	set(wrap("", "", chronicSpec, 0), "chronic")
	set(wrap("", "", niceSpec, 0), "nice")
	set(wrap("", "", ioniceSpec, 0), "ionice")
	set(wrap("", "", timeoutSpec, 1), "timeout")
	set(wrap("", "", stdbufSpec, 0), "stdbuf")
	set(wrap(ClassPrivilege, "raises privileges", sudoSpec, 0), "sudo")
	set(wrap(ClassPrivilege, "raises privileges", doasSpec, 0), "doas")
	set(wrap(ClassSystem, "changes the root directory", chrootSpec, 1), "chroot")
	set(wrap(ClassSystem, "enters or creates namespaces", unshareSpec, 0), "unshare")
	set(wrap(ClassSystem, "enters or creates namespaces", nsenterSpec, 0), "nsenter")
	sched := func(s *optSpec) classifier {
		return func(c *call) {
			c.add(ClassProcess, "changes scheduling")
			p := c.parse(s)
			if p.has("p", "pid", "m", "max") {
				return // works on existing processes, runs nothing
			}
			if len(p.operands) > 1 {
				c.inner(p.operands[1:], c.stdin)
			}
		}
	}
	set(sched(tasksetSpec), "taskset")
	set(sched(chrtSpec), "chrt")
	set(commandBuiltin, "command")
	set(execBuiltin, "exec")
	set(envCmd, "env")
	set(xargsCmd, "xargs")
	set(flockCmd, "flock")
	set(watchCmd, "watch")
}

func commandBuiltin(c *call) {
	p := c.parse(commandSpec)
	if p.has("v", "V") {
		return // command -v / -V only looks the name up
	}
	c.inner(p.operands, c.stdin)
}

func execBuiltin(c *call) {
	c.inner(c.parse(execSpec).operands, c.stdin)
}

// envCmd judges env: its NAME=VALUE operands are exported to the command
// (judged as assignments), the rest is the command; -S splits a string
// into a command, which is not judged (dynamic).
func envCmd(c *call) {
	p := c.parse(envSpec)
	rest := p.operands
	for len(rest) > 0 {
		a := rest[0]
		if a.static && a.s == "-" { // env - : like -i
			rest = rest[1:]
			continue
		}
		k, _, ok := strings.Cut(a.s, "=")
		if !ok || k == "" {
			break
		}
		if !a.static && !strings.Contains(a.lead, "=") {
			break // the command itself, given by an expansion
		}
		c.j.setVar(k, true)
		rest = rest[1:]
	}
	c.inner(rest, c.stdin) // nothing: env prints the environment
}

// xargsCmd judges the command xargs runs; its extra arguments come from
// standard input and are not known.
func xargsCmd(c *call) {
	p := c.parse(xargsSpec)
	replace := ""
	for _, g := range p.opts {
		switch g.opt.name {
		case "I", "i", "replace":
			replace = "{}"
			if g.value != nil && g.value.s != "" {
				replace = g.value.s
			}
		}
	}
	rest := slices.Clone(p.operands)
	if len(rest) == 0 {
		return // echo
	}
	for k, a := range rest {
		if replace != "" && strings.Contains(a.s, replace) {
			rest[k] = dynamicArg(a.s)
		}
	}
	if replace == "" {
		rest = append(rest, dynamicArg("(args from stdin)"))
	}
	c.inner(rest, stdinSrc{desc: "the standard input of xargs"})
}

// flockCmd judges flock: it creates its lock file (unless given a file
// descriptor) and runs a command, or a shell string with -c.
func flockCmd(c *call) {
	p := c.parse(flockSpec)
	if len(p.operands) == 0 {
		return
	}
	if f := p.operands[0]; !f.static || !isDigits(f.s) {
		c.add(ClassWrite, "creates its lock file")
	}
	if cmds := p.values("c", "command"); len(cmds) > 0 {
		c.script(cmds[0], "a command string (-c)")
		return
	}
	c.inner(p.operands[1:], c.stdin)
}

// watchCmd judges watch: it runs its words joined with spaces under sh -c
// (or as a command with -x).
func watchCmd(c *call) {
	p := c.parse(watchSpec)
	if len(p.operands) == 0 {
		return
	}
	if p.has("x", "exec") {
		c.inner(p.operands, c.stdin)
		return
	}
	words := make([]string, 0, len(p.operands))
	for _, a := range p.operands {
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("runs a command not known until the command runs (`%s`)", short(a.s)))
			return
		}
		words = append(words, a.s)
	}
	c.script(arg{s: strings.Join(words, " "), static: true}, "a command")
}

// shellCmd judges sh, bash, ... : the script of -c, the script read from a
// here-document, or a script the policy cannot see. An interactive (-i)
// or login (-l) shell, --rcfile and --init-file run start-up files the
// policy cannot see.
func shellCmd(c *call) {
	if c.name == "zsh" {
		c.add(ClassExec, "reads ~/.zshenv, which the policy cannot see, even to run a script")
	}
	p := c.parse(shellSpec)
	for _, v := range p.values("o") {
		if !v.static || v.s == "keyword" {
			c.addAs(c.name+" -o "+v.s, ClassEnvironment, "makes NAME=VALUE arguments anywhere assignments")
		}
	}
	rest := p.operands
	if len(rest) > 0 && rest[0].static && rest[0].s == "-" {
		rest = rest[1:]
	}
	switch {
	case p.has("c"):
		if len(rest) == 0 {
			c.add(ClassDynamic, "has -c without a script")
			return
		}
		c.script(rest[0], "a script (-c)")
	case len(rest) > 0 && !p.has("s"):
		c.add(ClassExec, fmt.Sprintf("runs the script file `%s`, which the policy cannot see", short(rest[0].s)))
	case c.stdin.known:
		c.j.script(c.stdin.text, stdinSrc{desc: "the standard input of " + c.name})
	default:
		c.add(ClassExec, fmt.Sprintf("runs commands read from %s, which the policy cannot see", c.stdin.desc))
	}
}

// operandsWrite is a read-only program whose operands after the first
// n are output files (uniq IN OUT, xxd IN OUT).
func operandsWrite(s *optSpec, n int) classifier {
	return func(c *call) {
		if len(c.parse(s).operands) > n {
			c.add(ClassWrite, "writes its output file (an operand)")
		}
	}
}

func teeCmd(c *call) {
	for _, a := range c.parse(teeSpec).operands {
		if !a.static || !safeSink(a.s) {
			c.add(ClassWrite, "writes to a file")
			return
		}
	}
}

func dateCmd(c *call) {
	for _, a := range c.parse(dateSpec).operands {
		if !strings.HasPrefix(a.lead, "+") {
			c.add(ClassSystem, "sets the system clock")
			return
		}
	}
}

func hostnameCmd(c *call) {
	if len(c.parse(hostnameSpec).operands) > 0 {
		c.add(ClassSystem, "sets the host name")
	}
}

// lessCmd: +cmd operands are less commands (! runs a shell, s and o
// write); only +N, +F and +G (go to a line, follow, go to the end) are
// known to be harmless.
func lessCmd(c *call) {
	for _, a := range c.parse(lessSpec).operands {
		if a.static && lessMove.MatchString(a.s) {
			continue
		}
		if strings.HasPrefix(a.lead, "+") || !a.static && a.lead == "" {
			c.add(ClassExec, fmt.Sprintf("gives less commands to run (`%s`)", short(a.s)))
			return
		}
	}
}

// compressor judges gzip and its kin: to standard output (-c, or no file
// operands), listing (-l) and testing (-t) only read; otherwise files are
// replaced by their (de)compressed form.
func compressor(s *optSpec, toStdout bool) classifier {
	return func(c *call) {
		p := c.parse(s)
		files := len(p.operands) > 1 || len(p.operands) == 1 && !(p.operands[0].static && p.operands[0].s == "-")
		switch {
		case p.has("m", "multiple"):
		case p.has("l", "list", "t", "test"):
			return
		case toStdout || p.has("c", "stdout", "to-stdout"):
			if c.name != "lz4" || len(p.operands) <= 1 {
				return
			}
		case !files:
			return // standard input to standard output
		}
		c.add(ClassWrite, "replaces files with their (de)compressed form")
	}
}

// rgCmd is ripgrep.
var rgCmd = specRead(rgSpec)

// printfCmd: printf -v NAME sets a variable.
func printfCmd(c *call) {
	p := c.parse(printfSpec)
	for _, v := range p.values("v") {
		c.j.varName(v)
	}
}

// varName judges a word a builtin sets as a variable (read NAME, printf
// -v NAME, getopts OPTS NAME).
func (j *judge) varName(a arg) {
	if !a.static {
		j.varRef(a)
		return
	}
	j.setVar(a.s, false)
}

func readBuiltin(c *call) {
	p := c.parse(readSpec)
	for _, v := range p.values("a") {
		c.j.varName(v)
	}
	for _, a := range p.operands {
		c.j.varName(a)
	}
}

func getoptsBuiltin(c *call) {
	if pos := positionals(c.args); len(pos) > 1 {
		c.j.varName(pos[1])
	}
}

func waitBuiltin(c *call) {
	for i, a := range c.args {
		if a.static && a.s == "-p" && i+1 < len(c.args) {
			c.j.varName(c.args[i+1])
		}
	}
}

// unsetBuiltin: unset 'a[$(cmd)]' runs the command.
func unsetBuiltin(c *call) {
	for _, a := range c.args {
		if a.static && strings.HasPrefix(a.s, "-") {
			continue
		}
		c.j.varRef(a)
	}
}

// testBuiltin: test -v 'a[$(cmd)]' runs the command.
func testBuiltin(c *call) {
	for i, a := range c.args {
		if a.static && (a.s == "-v" || a.s == "-R") && i+1 < len(c.args) {
			c.j.varRef(c.args[i+1])
		}
	}
}

// setBuiltin: set -k (keyword) makes NAME=VALUE arguments anywhere
// assignments; set -a exports every later assignment; set -- sets the
// positional parameters.
func setBuiltin(c *call) {
	for i, a := range c.args {
		if !a.static {
			if optionLike(a, true) {
				c.add(ClassDynamic, fmt.Sprintf("has an option not known until the command runs (`%s`)", short(a.s)))
			}
			continue
		}
		if a.s == "--" || a.s == "-" {
			return
		}
		if len(a.s) < 2 || a.s[0] != '-' && a.s[0] != '+' {
			return // positional parameters
		}
		if a.s[0] == '-' && strings.ContainsAny(a.s[1:], "ka") {
			c.addAs("set "+a.s, ClassEnvironment, "makes later assignments reach the environment of programs")
		}
		if (a.s == "-o" || a.s == "+o") && i+1 < len(c.args) {
			if v := c.args[i+1]; !v.static || v.s == "keyword" || v.s == "allexport" {
				c.addAs("set -o "+v.s, ClassEnvironment, "makes later assignments reach the environment of programs")
			}
		}
	}
}

// declBuiltin is declare, export, local, readonly, typeset run as a
// command (builtin export X=1, command declare ...): its NAME=VALUE words
// are assignments.
func declBuiltin(c *call) {
	exported := c.name == "export"
	for _, a := range c.args {
		if a.static && len(a.s) > 1 && a.s[0] == '-' {
			exported = exported || strings.Contains(a.s, "x")
			if strings.Contains(a.s, "n") {
				c.add(ClassEnvironment, "declares a name reference")
			}
			continue
		}
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("declares a variable whose name is not known until the command runs (`%s`)", short(a.s)))
			continue
		}
		c.j.declText(a.s, exported)
	}
}

// letBuiltin: let evaluates its arguments as arithmetic.
func letBuiltin(c *call) {
	for _, a := range c.args {
		if !a.static || strings.ContainsAny(a.s, "$`") {
			c.add(ClassDynamic, fmt.Sprintf("evaluates arithmetic that bash expands again (`%s`)", short(a.s)))
		}
	}
}

// findPrimaries are find's expression words with the number of words they
// take, and what they do.
var findPrimaries = map[string]struct {
	n     int
	class Class
}{
	"daystart": {0, ""}, "depth": {0, ""}, "d": {0, ""}, "follow": {0, ""}, "ignore_readdir_race": {0, ""},
	"noignore_readdir_race": {0, ""}, "mount": {0, ""}, "xdev": {0, ""}, "noleaf": {0, ""}, "nowarn": {0, ""},
	"warn": {0, ""}, "help": {0, ""}, "version": {0, ""}, "empty": {0, ""}, "executable": {0, ""},
	"false": {0, ""}, "true": {0, ""}, "nogroup": {0, ""}, "nouser": {0, ""}, "readable": {0, ""},
	"writable": {0, ""}, "ls": {0, ""}, "print": {0, ""}, "print0": {0, ""}, "prune": {0, ""}, "quit": {0, ""},
	"not": {0, ""}, "a": {0, ""}, "and": {0, ""}, "o": {0, ""}, "or": {0, ""},
	"maxdepth": {1, ""}, "mindepth": {1, ""}, "regextype": {1, ""}, "files0-from": {1, ""}, "amin": {1, ""},
	"anewer": {1, ""}, "atime": {1, ""}, "cmin": {1, ""}, "cnewer": {1, ""}, "ctime": {1, ""}, "fstype": {1, ""},
	"gid": {1, ""}, "group": {1, ""}, "ilname": {1, ""}, "iname": {1, ""}, "inum": {1, ""}, "ipath": {1, ""},
	"iregex": {1, ""}, "iwholename": {1, ""}, "links": {1, ""}, "lname": {1, ""}, "mmin": {1, ""},
	"mtime": {1, ""}, "name": {1, ""}, "newer": {1, ""}, "path": {1, ""}, "perm": {1, ""}, "regex": {1, ""},
	"samefile": {1, ""}, "size": {1, ""}, "type": {1, ""}, "uid": {1, ""}, "used": {1, ""}, "user": {1, ""},
	"wholename": {1, ""}, "xtype": {1, ""}, "context": {1, ""}, "printf": {1, ""},
	"delete": {0, ClassDelete}, "fls": {1, ClassWrite}, "fprint": {1, ClassWrite}, "fprint0": {1, ClassWrite},
	"fprintf": {2, ClassWrite},
}

var (
	findNewerXY = regexp.MustCompile(`^newer[aBcmt][aBcmt]$`)
	lessMove    = regexp.MustCompile(`^\+[0-9]*[FGg]?$`)
)

// findCmd judges find word by word as find reads it: its options
// (-H -L -P -D -O), the starting points, then the expression, whose every
// word must be a primary the policy knows. -exec, -execdir, -ok and
// -okdir run a command per file (judged as a command); -delete deletes;
// -fprint, -fprintf and -fls write.
func findCmd(c *call) {
	args := c.args
	i := 0
	dynamic := func(a arg) {
		c.add(ClassDynamic, fmt.Sprintf("has an expression word not known until the command runs (`%s`)", short(a.s)))
	}
	// Options, then starting points: words up to the first that starts
	// with '-', '(' or '!'.
points:
	for ; i < len(args); i++ {
		a := args[i]
		if !a.static {
			if optionLike(a, false) || strings.HasPrefix(a.lead, "(") || strings.HasPrefix(a.lead, "!") {
				dynamic(a)
			}
			continue
		}
		switch {
		case a.s == "-H" || a.s == "-L" || a.s == "-P" || strings.HasPrefix(a.s, "-O"):
			continue
		case a.s == "-D":
			i++
			continue
		case a.s == "--":
			continue
		}
		if strings.HasPrefix(a.s, "-") || a.s == "(" || a.s == "!" {
			break points
		}
	}
	for ; i < len(args); i++ {
		a := args[i]
		if !a.static {
			dynamic(a)
			continue
		}
		switch a.s {
		case "(", ")", "!", ",":
			continue
		}
		name, ok := strings.CutPrefix(a.s, "-")
		if !ok {
			c.add(ClassUnknown, fmt.Sprintf("has the expression word `%s`, which the policy does not know", short(a.s)))
			continue
		}
		switch name {
		case "exec", "execdir", "ok", "okdir":
			var inner []arg
			for i++; i < len(args); i++ {
				b := args[i]
				if b.static && (b.s == ";" || b.s == "+") {
					break
				}
				if pre, _, ok := strings.Cut(b.s, "{}"); ok {
					// a path under a starting point, which never starts with '-'
					b = arg{s: b.s, lead: pre}
					if pre == "" {
						b.lead = "./"
					}
				}
				inner = append(inner, b)
			}
			if len(inner) > 0 {
				c.inner(inner, stdinSrc{desc: "the standard input of find"})
			}
			continue
		}
		p, ok := findPrimaries[name]
		if !ok && findNewerXY.MatchString(name) {
			p, ok = findPrimaries["newer"]
		}
		if !ok {
			c.add(ClassUnknown, fmt.Sprintf("has the primary `%s`, which the policy does not know", short(a.s)))
			continue
		}
		if p.class != "" {
			c.addAs("find "+a.s, p.class, fmt.Sprintf("has the primary `%s`, which %s", a.s, optPhrase[p.class]))
		}
		for k := 0; k < p.n && i+1 < len(args); k++ {
			i++
			if args[i].split {
				dynamic(args[i])
			}
		}
	}
}

// sedCmd judges sed: -i writes in place; a script with w, W or e (or the
// w and e flags of s) writes files or runs commands; -f runs a script file.
func sedCmd(c *call) {
	p := c.parse(sedSpec)
	scripts := p.values("e", "expression")
	if !p.has("e", "expression", "f", "file") && len(p.operands) > 0 {
		scripts = append(scripts, p.operands[0])
	}
	for _, s := range scripts {
		if !s.static {
			c.add(ClassDynamic, fmt.Sprintf("runs a sed script not known until the command runs (`%s`)", short(s.s)))
			continue
		}
		if sedUnsafe(s.s) {
			c.add(ClassExec, "has a script that writes files or runs commands (w, W, e)")
		}
	}
}

// awkCmd judges awk: a program with system(), pipes, output redirection
// or getline may run commands or write files; -W NAME is --NAME.
func awkCmd(c *call) {
	p := c.parse(awkSpec)
	for _, w := range p.values("W") {
		name, _, _ := strings.Cut(w.s, "=")
		if o, ok := awkSpec.resolveLong(name); !w.static || !ok {
			c.add(ClassUnknown, fmt.Sprintf("has the option `-W %s`, which the policy does not know", short(w.s)))
		} else {
			c.option(given{opt: o, spelled: "-W " + name})
		}
	}
	progs := p.values("e", "source")
	if !p.has("e", "source", "f", "file", "E", "exec") && len(p.operands) > 0 {
		progs = append(progs, p.operands[0])
	}
	for _, a := range progs {
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("has a program not known until the command runs (`%s`)", short(a.s)))
			continue
		}
		for _, bad := range []string{"system", "|", ">", "getline", "@", "close", "fflush"} {
			if strings.Contains(a.s, bad) {
				c.add(ClassExec, fmt.Sprintf("has a program that may run commands or write files (%s)", bad))
				break
			}
		}
	}
}

// tarCmd lets tar list an archive (or extract to standard output);
// anything else writes. The old form "tar tzf x" (letters without a dash,
// their values following in order) is read as "tar -t -z -f x".
func tarCmd(c *call) {
	args := c.args
	if len(args) > 0 && args[0].static && args[0].s != "" && !strings.HasPrefix(args[0].s, "-") {
		var conv, vals []arg
		rest := args[1:]
		for k := 0; k < len(args[0].s); k++ {
			ch := args[0].s[k]
			conv = append(conv, arg{s: "-" + string(ch), static: true, lead: "-" + string(ch)})
			if o, ok := tarSpec.options().short[ch]; ok && o.value == needValue && len(rest) > 0 {
				vals, rest = append(vals, rest[0]), rest[1:]
				conv = append(conv, vals[len(vals)-1])
			}
		}
		args = append(conv, rest...)
	}
	p := c.parseArgs(tarSpec, args)
	if !p.has("force-local") {
		for _, f := range p.values("f", "file") {
			before, _, remote := strings.Cut(f.s, ":")
			if !f.static || remote && !strings.Contains(before, "/") {
				c.addAs("tar -f "+f.s, ClassNetwork, "may open a remote archive (host:path) through rsh")
			}
		}
	}
	if p.has("t", "list") || p.has("x", "extract", "get") && p.has("O", "to-stdout") {
		return
	}
	c.add(ClassWrite, "creates or extracts files")
}

// gitCmd classifies git by subcommand, after git's own options.
func gitCmd(c *call) {
	p := c.parse(gitSpec)
	if len(p.operands) == 0 {
		return // "git" alone, "git --version"
	}
	if !p.operands[0].static {
		c.add(ClassDynamic, "has a subcommand not known until the command runs")
		return
	}
	sub := p.operands[0].s
	rest := p.operands[1:]
	name := "git " + sub
	sc := &call{j: c.j, name: name, args: rest, stdin: c.stdin}
	sc.parse(gitSubDanger)
	gitSub(c, sub, rest)
}
