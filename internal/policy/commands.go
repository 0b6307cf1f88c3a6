package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
)

// classifier judges one simple command whose name is in the table.
type classifier func(c *call)

// The command table is built once, on first use, and never changed.
var (
	tableOnce sync.Once
	tableMap  map[string]classifier
)

func commandTable() map[string]classifier {
	tableOnce.Do(func() { tableMap = buildTable() })
	return tableMap
}

func fixed(cl Class, phrase string) classifier {
	return func(c *call) { c.add(cl, phrase) }
}

func read(c *call) {}

// readUnless is a command that only reads, unless one of the options in
// bad is given, which makes it cl: a long option also by a unique prefix
// (--del for --delete) and with =value, a short one also in a cluster;
// an option given by an expansion is dynamic. The other options of these
// programs are not listed: only dangerous ones are modelled.
func readUnless(cl Class, phrase string, bad ...string) classifier {
	return func(c *call) {
		for _, a := range c.args {
			if a.static && a.s == "--" {
				return
			}
			if !a.static {
				if optionLike(a, false) {
					c.add(ClassDynamic, fmt.Sprintf("has an option not known until the command runs (`%s`)", short(a.s)))
					return
				}
				continue
			}
			given, _, _ := strings.Cut(a.s, "=")
			for _, b := range bad {
				b = strings.TrimSuffix(b, "=")
				if given == b || len(b) == 2 && b[0] == '-' && shortFlag(a.s, b[1]) ||
					len(given) > 2 && strings.HasPrefix(given, "--") && strings.HasPrefix(b, given) {
					c.add(cl, fmt.Sprintf("%s (option %s)", phrase, b))
					return
				}
			}
		}
	}
}

// shortFlag reports whether a is a cluster of short options holding f.
func shortFlag(a string, f byte) bool {
	return len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], f) >= 0
}

// positionals returns the args that are not options (do not start with -).
func positionals(args []arg) []arg {
	var out []arg
	for i, a := range args {
		if a.static && a.s == "--" {
			return append(out, args[i+1:]...)
		}
		if a.static && strings.HasPrefix(a.s, "-") && a.s != "-" {
			continue
		}
		out = append(out, a)
	}
	return out
}

// readNoArgs only reads when given no positional args, else it is cl.
func readNoArgs(cl Class, phrase string) classifier {
	return func(c *call) {
		if len(positionals(c.args)) > 0 {
			c.add(cl, phrase)
		}
	}
}

// subcommand classifies by the first positional arg: one of reads only
// reads (none at all counts as ""), anything else is cl.
func subcommand(cl Class, phrase string, reads ...string) classifier {
	return func(c *call) {
		pos := positionals(c.args)
		sub := ""
		if len(pos) > 0 {
			if !pos[0].static {
				c.add(ClassDynamic, "has a subcommand not known until the command runs")
				return
			}
			sub = pos[0].s
		}
		if !slices.Contains(reads, sub) {
			c.addAs(strings.TrimSpace(c.name+" "+sub), cl, phrase)
		}
	}
}

func buildTable() map[string]classifier {
	t := map[string]classifier{}
	set := func(f classifier, names ...string) {
		for _, n := range names {
			t[n] = f
		}
	}
	// Read-only commands.
	set(read, closedReads...)
	set(specRead(sortSpec), "sort")
	set(operandsWrite(uniqSpec, 1), "uniq")
	set(operandsWrite(xxdSpec, 1), "xxd")
	set(specRead(cutSpec), "cut")
	set(specRead(iconvSpec), "iconv")
	set(specRead(fileSpec), "file")
	set(specRead(dmesgSpec), "dmesg")
	set(specRead(journalctlSpec), "journalctl")
	set(specRead(ssSpec), "ss")
	set(specRead(treeSpec), "tree")
	set(specRead(dmidecodeSpec), "dmidecode")
	set(specRead(blkidSpec), "blkid")
	set(specRead(moreSpec), "more")
	set(rgCmd, "rg")
	set(lessCmd, "less")
	set(teeCmd, "tee")
	set(dateCmd, "date")
	set(hostnameCmd, "hostname")
	set(printfCmd, "printf")
	set(readBuiltin, "read")
	set(getoptsBuiltin, "getopts")
	set(waitBuiltin, "wait")
	set(unsetBuiltin, "unset")
	set(testBuiltin, "test", "[")
	set(setBuiltin, "set")
	set(declBuiltin, "declare", "typeset", "local", "readonly", "export")
	set(letBuiltin, "let")
	set(readUnless(ClassWrite, "writes files in place", "-i", "--in-place", "--inplace"), "yq")
	t["find"] = findCmd
	t["git"] = gitCmd
	t["sed"] = sedCmd
	set(awkCmd, "awk", "gawk", "mawk", "nawk")
	t["tar"] = tarCmd
	set(compressor(gzipSpec, false), "gzip", "gunzip")
	set(compressor(gzipSpec, true), "zcat")
	set(compressor(bzip2Spec, false), "bzip2", "bunzip2")
	set(compressor(bzip2Spec, true), "bzcat")
	set(compressor(xzSpec, false), "xz", "unxz")
	set(compressor(xzSpec, true), "xzcat")
	set(compressor(zstdSpec, false), "zstd", "unzstd")
	set(compressor(zstdSpec, true), "zstdcat")
	set(compressor(lz4Spec, false), "lz4")
	set(subcommand(ClassSystem, "changes services or the system", "", "status", "show", "cat", "list-units", "list-unit-files", "list-timers", "list-sockets", "list-dependencies", "list-jobs", "list-machines", "is-active", "is-enabled", "is-failed", "is-system-running", "get-default", "show-environment", "help"), "systemctl")
	set(func(c *call) {
		pos := positionals(c.args)
		if len(pos) == 2 && pos[1].static && pos[1].s == "status" || len(pos) == 0 || len(pos) == 1 && pos[0].static && pos[0].s == "--status-all" {
			return
		}
		c.add(ClassSystem, "starts, stops or changes services")
	}, "service")
	set(subcommand(ClassSystem, "changes the system", "", "status", "show", "list-timezones", "timesync-status", "show-timesync"), "timedatectl")
	set(subcommand(ClassSystem, "changes the system", "", "status"), "hostnamectl")
	set(subcommand(ClassSystem, "changes sessions", "", "list-sessions", "list-users", "list-seats", "show-session", "show-user", "session-status", "user-status"), "loginctl")
	set(subcommand(ClassSystem, "changes resolver settings", "", "status", "statistics", "query"), "resolvectl")
	t["ip"] = ipCmd
	set(readNoArgs(ClassSystem, "changes network interfaces"), "ifconfig")
	set(readUnless(ClassSystem, "changes the routing table", "add", "del", "delete", "flush", "change"), "route")
	set(readUnless(ClassSystem, "changes the ARP table", "-d", "-s", "-f", "--delete", "--set", "--file"), "arp")
	set(readNoArgs(ClassSystem, "mounts file systems"), "mount")
	set(func(c *call) {
		for _, a := range c.args {
			if !a.static || strings.Contains(a.s, "=") || a.s == "-w" || a.s == "--write" || a.s == "-p" || strings.HasPrefix(a.s, "--load") || a.s == "--system" {
				c.add(ClassSystem, "changes kernel parameters")
				return
			}
		}
	}, "sysctl")
	set(func(c *call) {
		for _, a := range c.args {
			if a.static && (a.s == "-l" || a.s == "--list") {
				return
			}
		}
		c.add(ClassSystem, "changes scheduled jobs")
	}, "crontab")
	set(func(c *call) {
		for _, a := range c.args {
			if a.static && (a.s == "-L" || a.s == "-S" || a.s == "--list" || a.s == "--list-rules" || shortFlag(a.s, 'L') && !shortFlag(a.s, 'F')) {
				return
			}
		}
		c.add(ClassSystem, "changes the firewall")
	}, "iptables", "ip6tables")
	set(subcommand(ClassSystem, "changes the firewall", "list"), "nft")
	set(subcommand(ClassSystem, "changes the firewall", "status"), "ufw")
	set(subcommand(ClassSystem, "changes installed packages", "list", "show", "search", "policy", "depends", "rdepends", "showpkg", "madison"), "apt", "apt-cache")
	set(func(c *call) {
		for _, a := range c.args {
			if a.static && (a.s == "-l" || a.s == "-L" || a.s == "-s" || a.s == "-S" || a.s == "--list" || a.s == "--status" || a.s == "--search" || a.s == "--listfiles" || a.s == "-p" || a.s == "--print-avail") {
				return
			}
		}
		c.add(ClassSystem, "changes installed packages")
	}, "dpkg", "dpkg-query")
	set(subcommand(ClassSystem, "changes containers or images", "ps", "images", "logs", "inspect", "version", "info", "top", "port", "diff", "history", "stats"), "docker", "podman")
	set(subcommand(ClassSystem, "changes the cluster", "get", "describe", "logs", "top", "version", "explain", "api-resources", "api-versions", "cluster-info"), "kubectl")
	set(fixed(ClassEnvironment, "defines an alias (a command that stands for another)"), "alias")
	set(readUnless(ClassEnvironment, "remaps a command name to another program", "-p"), "hash")

	// Writes, deletes, permissions.
	set(fixed(ClassWrite, "creates or changes files"), "cp", "mv", "dd", "truncate", "ln", "link", "mkdir", "touch", "install",
		"rename", "split", "csplit", "patch", "fallocate", "mknod", "mkfifo", "mktemp", "vi", "vim", "nano", "emacs",
		"ed", "ex", "unzip", "zip", "7z", "cpio", "ar", "sponge")
	set(fixed(ClassDelete, "deletes files"), "rm", "rmdir", "unlink", "shred", "srm", "wipe")
	set(fixed(ClassPermissions, "changes permissions or ownership"), "chmod", "chown", "chgrp", "chattr", "setfacl", "setcap", "chcon", "setfattr")
	// Processes and the system.
	set(func(c *call) {
		if len(c.args) == 1 && c.args[0].static && (c.args[0].s == "-l" || c.args[0].s == "-L" || c.args[0].s == "--list") {
			return
		}
		c.add(ClassProcess, "signals processes")
	}, "kill")
	set(fixed(ClassProcess, "signals or reprioritises processes"), "pkill", "killall", "skill", "snice", "renice", "disown", "fg", "bg")
	set(fixed(ClassSystem, "changes the state of the system"), "reboot", "shutdown", "halt", "poweroff", "init", "telinit", "kexec",
		"useradd", "userdel", "usermod", "adduser", "deluser", "groupadd", "groupdel", "groupmod", "passwd", "chpasswd", "gpasswd",
		"visudo", "vipw", "vigr", "chsh", "chfn", "umount", "swapon", "swapoff", "modprobe", "insmod", "rmmod", "depmod",
		"mkfs", "mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "cfdisk", "parted", "gdisk", "sgdisk", "blkdiscard", "hdparm",
		"losetup", "cryptsetup", "lvcreate", "lvremove", "vgremove", "pvremove", "mdadm", "apt-get", "yum", "dnf", "rpm", "snap",
		"pip", "pip3", "npm", "yarn", "pnpm", "gem", "cargo", "go", "make", "update-alternatives", "ldconfig", "at", "batch",
		"systemd-run", "firewall-cmd", "helm", "terraform", "ansible", "ansible-playbook", "lshw",
		"logger", "wall", "write", "tc", "ethtool", "nmcli", "iw", "brctl")
	for _, fs := range []string{"ext2", "ext3", "ext4", "xfs", "btrfs", "vfat", "fat", "msdos", "ntfs", "exfat", "f2fs"} {
		t["mkfs."+fs] = fixed(ClassSystem, "creates a file system")
	}
	set(fixed(ClassPrivilege, "raises privileges"), "su", "pkexec", "runuser", "setpriv", "capsh")
	set(fixed(ClassNetwork, "reaches the network"), "curl", "wget", "nc", "ncat", "netcat", "socat", "ssh", "scp", "sftp",
		"rsync", "ftp", "lftp", "tftp", "telnet", "ping", "ping6", "traceroute", "tracepath", "mtr", "dig", "nslookup",
		"host", "whois", "aria2c", "http", "https", "openssl", "nmap", "ssh-keyscan", "sshpass", "mail", "sendmail",
		"mosh", "rclone", "s3cmd", "aws", "gcloud", "az", "gh", "tea", "nsupdate", "wg")
	set(fixed(ClassExec, "runs code the policy cannot see"), "python", "python2", "python3", "perl", "ruby", "node",
		"nodejs", "deno", "bun", "php", "lua", "luajit", "tclsh", "wish", "Rscript", "R", "julia", "java", "jshell",
		"groovy", "scala", "osascript", "pwsh", "powershell", "expect", "gdb", "lldb", "strace", "ltrace", "script",
		"dc", "screen", "tmux", "parallel", "run-parts", "ld.so", "fish", "csh", "tcsh")
	set(fixed(ClassEnvironment, "changes how later commands are found or run"), "enable", "complete")

	// Wrappers: judged by the command they run.
	wrappers(set)
	set(shellCmd, "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash")
	set(func(c *call) {
		if len(c.args) == 0 {
			return // lists the applets
		}
		c.inner(c.args, c.stdin)
	}, "busybox", "toybox")
	set(evalCmd, "eval")
	set(sourceCmd, "source", ".")
	set(xargsCmd, "xargs")
	set(trapCmd, "trap")
	return t
}

func evalCmd(c *call) {
	parts := make([]string, 0, len(c.args))
	for _, a := range c.args {
		if !a.static || a.pattern {
			c.add(ClassDynamic, fmt.Sprintf("evaluates a string not known until the command runs (`%s`)", short(a.s)))
			return
		}
		parts = append(parts, a.s)
	}
	c.j.script(strings.Join(parts, " "), c.stdin)
}

func sourceCmd(c *call) {
	if len(c.args) > 0 && c.args[0].static && c.args[0].s == "/dev/stdin" && c.stdin.known {
		c.j.script(c.stdin.text, stdinSrc{desc: "the standard input of " + c.name})
		return
	}
	file := ""
	if len(c.args) > 0 {
		file = c.args[0].s
	}
	c.add(ClassExec, fmt.Sprintf("runs the script file `%s`, which the policy cannot see", short(file)))
}

func trapCmd(c *call) {
	pos := positionals(c.args)
	if len(pos) < 2 {
		return // lists traps, or resets one
	}
	c.script(pos[0], "a trap handler")
}

// sedUnsafe reports whether a sed script uses the w, W or e commands or
// the w or e flags of s (or a command it does not know).
func sedUnsafe(s string) bool {
	i, n := 0, len(s)
	field := func() { // skips a delimited field whose delimiter is s[i-1]
		if i > n || i == 0 {
			return
		}
		d := s[i-1]
		for i < n && s[i] != d {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		i++
	}
	toEOL := func() {
		for i < n && s[i] != '\n' {
			i++
		}
	}
	for i < n {
		ch := s[i]
		if ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '}' {
			i++
			continue
		}
		// Address: numbers, $, /re/, \cREc, ranges, steps, negation.
		for i < n {
			ch = s[i]
			switch {
			case ch >= '0' && ch <= '9' || ch == '$' || ch == ',' || ch == '~' || ch == '+' || ch == '!' || ch == ' ' || ch == 'I' && i > 0 && s[i-1] == '/' || ch == 'M' && i > 0 && s[i-1] == '/':
				i++
				continue
			case ch == '/':
				i++
				field()
				continue
			case ch == '\\' && i+1 < n:
				i += 2
				field()
				continue
			}
			break
		}
		if i >= n {
			return false
		}
		cmd := s[i]
		i++
		switch cmd {
		case '{', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'l', 'n', 'N', 'p', 'P', 'x', 'z', 'F', 'q', 'Q', 'L':
			for i < n && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case 's':
			if i >= n {
				return false
			}
			i++
			field()
			field()
			for i < n && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
				if s[i] == 'w' || s[i] == 'e' || s[i] == 'W' {
					return true
				}
				i++
			}
		case 'y':
			if i >= n {
				return false
			}
			i++
			field()
			field()
		case 'r', 'R', 'a', 'i', 'c':
			toEOL()
		case ':', 'b', 't', 'T', 'v':
			for i < n && s[i] != ';' && s[i] != '\n' {
				i++
			}
		case '#':
			toEOL()
		default: // w, W, e and anything unknown
			return true
		}
	}
	return false
}

// ipCmd lets ip show objects; add, del, set, flush and the rest change
// the network configuration.
func ipCmd(c *call) {
	var words []arg
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		if a.static && strings.HasPrefix(a.s, "-") {
			// ip takes any prefix of its options, in the order it tests
			// them (-b is -batch), with one or two dashes.
			opt := strings.TrimPrefix(a.s[1:], "-")
			abbrev := func(full string, min int) bool { return len(opt) >= min && strings.HasPrefix(full, opt) }
			switch {
			case abbrev("batch", 1):
				c.add(ClassSystem, "runs a batch of ip commands (-batch)")
				return
			case abbrev("loops", 1) || abbrev("family", 1) || abbrev("rcvbuf", 2) || abbrev("netns", 1):
				i++
			}
			continue
		}
		if !a.static && optionLike(a, false) && len(words) == 0 {
			c.add(ClassDynamic, fmt.Sprintf("has an option not known until the command runs (`%s`)", short(a.s)))
			return
		}
		words = append(words, a)
	}
	if len(words) < 2 {
		return // "ip addr", "ip r": show
	}
	for _, a := range words[:2] {
		if !a.static {
			c.add(ClassDynamic, "has an object or action not known until the command runs")
			return
		}
	}
	switch words[1].s {
	case "show", "sh", "s", "list", "lst", "ls", "l", "get", "g":
		return
	}
	if len(words[1].s) > 0 && !slices.Contains([]string{"add", "a", "del", "d", "delete", "set", "flush", "f", "change", "replace", "exec", "append", "prepend", "up", "down", "save", "restore", "monitor"}, words[1].s) {
		// "ip addr dev eth0": a show with a selector
		if words[1].s == "dev" || words[1].s == "to" || words[1].s == "scope" || words[1].s == "table" {
			return
		}
	}
	c.addAs("ip "+words[0].s+" "+words[1].s, ClassSystem, "changes the network configuration")
}

// gitSub classifies a git subcommand given its args (rest). The options
// that write or run programs (gitSubDanger) are judged before.
func gitSub(c *call, sub string, rest []arg) {
	name := "git " + sub
	first := ""
	if p := positionals(rest); len(p) > 0 {
		first = p[0].s
	}
	// has reports one of opts (a long one also by a unique prefix, as git
	// accepts, when prefix is set: for options that write, not for those
	// that make a command read-only).
	match := func(prefix bool, opts ...string) bool {
		return slices.ContainsFunc(rest, func(a arg) bool {
			given, _, _ := strings.Cut(a.s, "=")
			return a.static && slices.ContainsFunc(opts, func(o string) bool {
				o = strings.TrimSuffix(o, "=")
				return given == o || len(o) == 2 && o[0] == '-' && shortFlag(a.s, o[1]) ||
					prefix && len(given) > 2 && strings.HasPrefix(given, "--") && strings.HasPrefix(o, given)
			})
		})
	}
	has := func(opts ...string) bool { return match(true, opts...) }
	listing := func(opts ...string) bool { return match(false, opts...) }
	switch sub {
	case "log", "show", "diff", "status", "blame", "annotate", "ls-files", "ls-tree", "rev-parse", "rev-list",
		"describe", "shortlog", "cat-file", "whatchanged", "show-ref", "for-each-ref", "name-rev", "merge-base",
		"count-objects", "verify-commit", "verify-tag", "var", "version", "help", "check-ignore", "check-attr",
		"diff-tree", "diff-files", "diff-index", "cherry", "range-diff", "show-branch", "fsck", "grep":
		if sub == "grep" && has("-O", "--open-files-in-pager") {
			c.addAs(name+" -O", ClassExec, "runs a pager command")
		}
		if sub == "help" && has("-w", "-m", "-i") {
			c.addAs(name, ClassExec, "starts a browser, man or info")
		}
	case "reflog":
		if first == "expire" || first == "delete" || first == "drop" {
			c.addAs(name+" "+first, ClassWrite, "changes the repository")
		}
	case "branch":
		if has("-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-f", "--force", "-u", "--set-upstream-to", "--set-upstream-to=", "--unset-upstream", "--edit-description", "-t", "--track", "--track=") ||
			len(positionals(rest)) > 0 && !listing("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
			c.addAs(name, ClassWrite, "creates, renames or deletes branches")
		}
	case "tag":
		if has("-d", "--delete", "-a", "--annotate", "-s", "--sign", "-u", "--local-user", "--local-user=", "-f", "--force", "-m", "--message", "--message=", "-F", "--file", "--file=") ||
			len(positionals(rest)) > 0 && !listing("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
			c.addAs(name, ClassWrite, "creates or deletes tags")
		}
	case "remote":
		switch first {
		case "", "get-url":
		case "show", "update", "prune":
			c.addAs(name+" "+first, ClassNetwork, "reaches the network")
		default:
			c.addAs(name+" "+first, ClassWrite, "changes the repository's remotes")
		}
	case "config":
		if !listing("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l") && first != "get" && first != "list" ||
			has("--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "-e", "--edit") {
			c.addAs(name, ClassWrite, "changes git configuration")
		}
	case "stash":
		if first != "list" && first != "show" {
			c.addAs(strings.TrimSpace(name+" "+first), ClassWrite, "changes the working tree")
		}
	case "worktree":
		if first != "list" {
			c.addAs(strings.TrimSpace(name+" "+first), ClassWrite, "changes worktrees")
		}
	case "notes":
		if first != "" && first != "list" && first != "show" {
			c.addAs(name+" "+first, ClassWrite, "changes notes")
		}
	case "submodule":
		if first != "status" && first != "summary" && first != "" {
			c.addAs(name+" "+first, ClassNetwork, "may fetch submodules over the network")
		}
	case "push", "fetch", "pull", "clone", "ls-remote", "fetch-pack", "send-pack", "request-pull", "svn", "p4", "send-email":
		c.addAs(name, ClassNetwork, "reaches the network")
	case "archive":
		if has("--remote", "--remote=") {
			c.addAs(name+" --remote", ClassNetwork, "reaches the network")
		} else if has("-o", "--output", "--output=") {
			c.addAs(name+" -o", ClassWrite, "writes an archive file")
		}
	default:
		c.addAs(name, ClassWrite, "may change the repository")
	}
}

// catastrophic checks the patterns that are denied whatever the command's
// class: rm -rf /, recursive chmod/chown of /, dd or mkfs onto a disk,
// find / -delete, mv /, kill -9 -1. It reports whether one matched.
func catastrophic(c *call) bool {
	name := c.name
	deny := func(what string) bool {
		words := []string{name}
		for _, a := range c.args {
			words = append(words, a.s)
		}
		c.j.add(fmt.Sprintf("command `%s`", short(strings.Join(words, " "))), ClassCatastrophic, what)
		return true
	}
	recursive := func() bool {
		return slices.ContainsFunc(c.args, func(a arg) bool {
			return a.static && (a.s == "--recursive" || shortFlag(a.s, 'r') || shortFlag(a.s, 'R'))
		})
	}
	rootArg := func(args []arg) string {
		for _, a := range args {
			if rootish(a) {
				return a.s
			}
		}
		return ""
	}
	switch {
	case name == "rm":
		if slices.ContainsFunc(c.args, func(a arg) bool { return a.static && a.s == "--no-preserve-root" }) {
			return deny("deletes with --no-preserve-root")
		}
		if r := rootArg(positionals(c.args)); r != "" && recursive() {
			return deny(fmt.Sprintf("deletes %s recursively", r))
		}
	case name == "chmod" || name == "chown" || name == "chgrp" || name == "setfacl" || name == "chattr":
		if r := rootArg(positionals(c.args)); r != "" && recursive() {
			return deny(fmt.Sprintf("changes permissions or ownership of %s recursively", r))
		}
	case name == "mv":
		if p := positionals(c.args); len(p) > 1 {
			if r := rootArg(p[:len(p)-1]); r != "" {
				return deny(fmt.Sprintf("moves %s away", r))
			}
		}
	case name == "find":
		if slices.ContainsFunc(c.args, func(a arg) bool { return a.static && a.s == "-delete" }) {
			for _, a := range c.args {
				if a.static && strings.HasPrefix(a.s, "-") {
					break
				}
				if rootish(a) {
					return deny(fmt.Sprintf("deletes everything under %s", a.s))
				}
			}
		}
	case name == "dd":
		for _, a := range c.args {
			if a.static && strings.HasPrefix(a.s, "of=") && device(strings.TrimPrefix(a.s, "of=")) {
				return deny("writes raw data onto a device")
			}
		}
	case strings.HasPrefix(name, "mkfs") || name == "mke2fs" || name == "mkswap" || name == "wipefs" || name == "blkdiscard" || name == "shred" || name == "sgdisk" || name == "sfdisk":
		for _, a := range c.args {
			if a.static && device(a.s) {
				return deny("destroys the data on a device")
			}
		}
	case name == "kill":
		pids := killPIDs(c.args)
		if slices.Contains(pids, "-1") {
			return deny("signals every process (pid -1)")
		}
	}
	return false
}

// killPIDs returns the pid arguments of kill, after the signal option.
func killPIDs(args []arg) []string {
	var out []string
	i := 0
	if i < len(args) && args[i].static {
		switch s := args[i].s; {
		case s == "-s" || s == "-n" || s == "--signal":
			i += 2
		case s == "--":
		case strings.HasPrefix(s, "-") && len(s) > 1:
			i++
		}
	}
	for ; i < len(args); i++ {
		if args[i].static && args[i].s == "--" {
			continue
		}
		out = append(out, args[i].s)
	}
	return out
}

// topDirs are the top-level directories whose loss breaks a system.
var topDirs = map[string]bool{"bin": true, "boot": true, "dev": true, "etc": true, "home": true, "lib": true, "lib32": true,
	"lib64": true, "libx32": true, "opt": true, "proc": true, "root": true, "run": true, "sbin": true, "srv": true, "sys": true,
	"usr": true, "var": true, "mnt": true, "media": true, "snap": true, "boot/efi": true, "usr/bin": true, "usr/lib": true, "usr/local": true, "var/lib": true}

// rootish reports whether a names the root, a top-level system directory
// or the home directory (with or without a trailing / or /*).
func rootish(a arg) bool {
	s := a.s
	if !a.static {
		s = strings.Trim(s, `"`)
		return s == "$HOME" || s == "${HOME}" || s == "$HOME/" || s == "$HOME/*" || s == "${HOME}/" || s == "${HOME}/*"
	}
	if s == "" {
		return false
	}
	for {
		switch {
		case strings.HasSuffix(s, "/*"):
			s = s[:len(s)-2]
		case strings.HasSuffix(s, "/."):
			s = s[:len(s)-2]
		case len(s) > 0 && strings.HasSuffix(s, "/"):
			s = s[:len(s)-1]
		default:
			goto done
		}
	}
done:
	if s == "" || s == "~" || s == "*" && !a.static {
		return true
	}
	if strings.HasPrefix(s, "/") {
		c := path.Clean(s)
		return c == "/" || topDirs[strings.TrimPrefix(c, "/")]
	}
	return false
}
