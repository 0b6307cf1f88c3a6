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

// readOptions is a command that only reads, unless one of the options in
// bad (exact, or as a prefix ending in '=') is given, which makes it cl.
func readUnless(cl Class, phrase string, bad ...string) classifier {
	return func(c *call) {
		for _, a := range c.args {
			if !a.static {
				continue
			}
			for _, b := range bad {
				if a.s == b || strings.HasSuffix(b, "=") && strings.HasPrefix(a.s, b) || len(b) == 2 && b[0] == '-' && shortFlag(a.s, b[1]) {
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

// tail returns args[i:], or nothing when an option's value was missing.
func tail(args []arg, i int) []arg {
	if i >= len(args) {
		return nil
	}
	return args[i:]
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

// wrapper runs another command: it skips its own options (withArg lists
// the options that take a value) and skip positionals, then judges the rest
// as a command. self is the class of the wrapper itself ("" for none);
// alone is what it does with no command.
func wrapper(self Class, selfPhrase string, skip int, withArg ...string) classifier {
	return func(c *call) {
		if self != "" {
			c.add(self, selfPhrase)
		}
		i := 0
		for ; i < len(c.args); i++ {
			a := c.args[i]
			if !a.static {
				break
			}
			if a.s == "--" {
				i++
				break
			}
			if !strings.HasPrefix(a.s, "-") || a.s == "-" {
				break
			}
			if slices.Contains(withArg, a.s) {
				i++
			}
		}
		i = min(i+skip, len(c.args))
		if i < len(c.args) {
			c.inner(c.args[i:], c.stdin)
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
	set(read, "ls", "dir", "vdir", "cat", "tac", "head", "tail", "grep", "egrep", "fgrep", "zgrep", "rg",
		"echo", "printf", "pwd", "whoami", "id", "groups", "uname", "df", "du", "free", "uptime", "ps",
		"pgrep", "pidof", "pstree", "wc", "uniq", "cut", "tr", "stat", "file", "which", "whereis", "type",
		"true", "false", ":", "test", "[", "basename", "dirname", "realpath", "readlink", "seq", "sleep",
		"nl", "od", "hexdump", "strings", "md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum", "b2sum",
		"base64", "base32", "cmp", "diff", "comm", "paste", "join", "fold", "fmt", "column", "expand",
		"unexpand", "rev", "zcat", "bzcat", "xzcat", "zstdcat", "jq", "nproc", "lscpu", "lsblk", "lsmod",
		"lspci", "lsusb", "lsof", "findmnt", "vmstat", "iostat", "mpstat", "w", "who", "last", "users",
		"logname", "getent", "tty", "locale", "printenv", "cal", "expr", "factor", "numfmt", "getconf",
		"arch", "lsb_release", "tree", "cd", "pushd", "popd", "dirs", "unset", "shift", "set", "shopt",
		"read", "wait", "return", "exit", "break", "continue", "getopts", "local", "declare", "typeset",
		"readonly", "export", "let", "umask", "ulimit", "times", "jobs", "less", "more", "yes", "netstat",
		"blkid", "lshw", "dmidecode", "sync", "top", "htop", "sum", "tsort", "ptx", "pr",
		"look", "sleep", "uptime")
	set(readUnless(ClassProcess, "kills sockets", "-K", "--kill"), "ss")
	set(readUnless(ClassWrite, "writes its output to a file", "-o", "--output", "--output="), "sort")
	set(readUnless(ClassWrite, "writes its output to a file", "-o", "--output="), "iconv")
	set(readUnless(ClassSystem, "changes the kernel log", "-c", "-C", "-D", "-E", "-n", "--clear", "--read-clear", "--console-off", "--console-on", "--console-level", "--console-level="), "dmesg")
	set(readUnless(ClassWrite, "removes or rewrites journal files", "--vacuum-size=", "--vacuum-time=", "--vacuum-files=", "--rotate", "--flush", "--sync", "--relinquish-var", "--smart-relinquish-var", "--setup-keys", "--update-catalog"), "journalctl")
	set(readUnless(ClassWrite, "writes files in place", "-i", "--in-place"), "yq")
	set(func(c *call) {
		if len(positionals(c.args)) >= 2 {
			c.add(ClassWrite, "writes its output file")
		}
	}, "uniq", "xxd")
	set(func(c *call) {
		for _, a := range positionals(c.args) {
			if !a.static || !safeSink(a.s) {
				c.add(ClassWrite, "writes to a file")
				return
			}
		}
	}, "tee")
	set(func(c *call) {
		for _, a := range c.args {
			if a.static && (a.s == "-s" || a.s == "--set" || strings.HasPrefix(a.s, "--set=")) {
				c.add(ClassSystem, "sets the system clock")
				return
			}
		}
		for _, a := range positionals(c.args) {
			if !strings.HasPrefix(a.s, "+") {
				c.add(ClassSystem, "sets the system clock")
				return
			}
		}
	}, "date")
	set(func(c *call) {
		for _, a := range c.args {
			if a.static && (a.s == "-F" || a.s == "--file" || a.s == "-b" || a.s == "--boot") {
				c.add(ClassSystem, "sets the host name")
				return
			}
		}
		if len(positionals(c.args)) > 0 {
			c.add(ClassSystem, "sets the host name")
		}
	}, "hostname")
	set(func(c *call) {
		if len(c.args) == 0 {
			return // prints the environment
		}
		wrapper("", "", 0, "-u", "--unset", "-C", "--chdir", "-S", "--split-string")(envCall(c))
	}, "env")
	t["find"] = findCmd
	t["git"] = gitCmd
	t["sed"] = sedCmd
	set(awkCmd, "awk", "gawk", "mawk", "nawk")
	t["tar"] = tarCmd
	set(func(c *call) {
		for _, a := range c.args {
			if a.static && (a.s == "-c" || a.s == "--stdout" || a.s == "-l" || a.s == "--list" || a.s == "-t" || a.s == "--test" || shortFlag(a.s, 'c') || shortFlag(a.s, 't') || shortFlag(a.s, 'l')) {
				return
			}
		}
		c.add(ClassWrite, "replaces files with their (de)compressed form")
	}, "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4")
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
		"systemd-run", "firewall-cmd", "helm", "terraform", "ansible", "ansible-playbook", "chroot", "unshare", "nsenter",
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
		"dc", "watch", "screen", "tmux", "parallel", "run-parts", "ld.so", "fish", "csh", "tcsh")
	set(fixed(ClassEnvironment, "changes how later commands are found or run"), "enable", "complete")

	// Wrappers: judged by the command they run.
	set(wrapper("", "", 0), "nohup", "setsid", "time", "unbuffer", "builtin", "chronic", "catchsegv")
	set(wrapper("", "", 0, "-n", "--adjustment"), "nice")
	set(wrapper("", "", 0, "-c", "--class", "-n", "--classdata", "-t"), "ionice")
	set(wrapper("", "", 1, "-s", "--signal", "-k", "--kill-after"), "timeout")
	set(wrapper("", "", 0, "-i", "-o", "-e", "--input", "--output", "--error"), "stdbuf")
	set(wrapper(ClassProcess, "changes scheduling", 1), "taskset", "chrt")
	set(wrapper(ClassPrivilege, "raises privileges", 0, "-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host", "-p", "--prompt", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T", "--command-timeout"), "sudo")
	set(wrapper(ClassPrivilege, "raises privileges", 0, "-u", "-C"), "doas")
	set(commandBuiltin, "command")
	set(execBuiltin, "exec")
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

// envCall returns c with the NAME=value words checked and dropped, so
// the wrapper sees the command.
func envCall(c *call) *call {
	out := &call{j: c.j, name: c.name, stdin: c.stdin}
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		if a.static && (a.s == "-S" || a.s == "--split-string" || strings.HasPrefix(a.s, "--split-string=") || strings.HasPrefix(a.s, "-S") && len(a.s) > 2) {
			c.add(ClassDynamic, "splits a string into a command (env -S)")
			return &call{j: c.j, name: c.name}
		}
		if a.static && !strings.HasPrefix(a.s, "-") {
			if k, _, ok := strings.Cut(a.s, "="); ok && k != "" {
				if sensitiveVar(k) {
					c.j.add(fmt.Sprintf("assignment `%s=`", short(k)), ClassEnvironment, "changes how later commands are found or run")
				}
				continue
			}
		}
		out.args = append(out.args, a)
	}
	return out
}

func commandBuiltin(c *call) {
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static || !strings.HasPrefix(a.s, "-") {
			break
		}
		if a.s == "--" {
			i++
			break
		}
		if strings.ContainsAny(a.s, "vV") {
			return // command -v / -V only looks the name up
		}
	}
	c.inner(c.args[i:], c.stdin)
}

func execBuiltin(c *call) {
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static || !strings.HasPrefix(a.s, "-") {
			break
		}
		if a.s == "-a" {
			i++
		}
		if a.s == "--" {
			i++
			break
		}
	}
	c.inner(tail(c.args, i), c.stdin)
}

// shellCmd judges sh, bash, ... : the script of -c, the script read from a
// here-document, or a script the policy cannot see.
func shellCmd(c *call) {
	hasC := false
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("has an option or script not known until the command runs (`%s`)", short(a.s)))
			return
		}
		s := a.s
		if s == "--" || s == "-" {
			i++
			break
		}
		if s == "-o" || s == "+o" || s == "-O" || s == "+O" || s == "--rcfile" || s == "--init-file" {
			i++
			continue
		}
		if strings.HasPrefix(s, "--") {
			continue
		}
		if len(s) > 1 && (s[0] == '-' || s[0] == '+') {
			if s[0] == '-' && strings.IndexByte(s[1:], 'c') >= 0 {
				hasC = true
			}
			continue
		}
		break
	}
	rest := tail(c.args, i)
	switch {
	case hasC:
		if len(rest) == 0 {
			c.add(ClassDynamic, "has -c without a script")
			return
		}
		c.script(rest[0], "a script (-c)")
	case len(rest) > 0:
		c.add(ClassExec, fmt.Sprintf("runs the script file `%s`, which the policy cannot see", short(rest[0].s)))
	case c.stdin.known:
		c.j.script(c.stdin.text, stdinSrc{desc: "the standard input of " + c.name})
	default:
		c.add(ClassExec, fmt.Sprintf("runs commands read from %s, which the policy cannot see", c.stdin.desc))
	}
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

// xargsCmd judges the command xargs runs; its extra arguments come from
// standard input and are not known.
func xargsCmd(c *call) {
	withArg := []string{"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--eof", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}
	replace := ""
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("has an option or command not known until it runs (`%s`)", short(a.s)))
			return
		}
		if a.s == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a.s, "-") {
			break
		}
		switch {
		case a.s == "-I" && i+1 < len(c.args):
			replace = c.args[i+1].s
		case strings.HasPrefix(a.s, "-I") && len(a.s) > 2:
			replace = a.s[2:]
		case a.s == "-i" || a.s == "--replace":
			replace = "{}"
		case strings.HasPrefix(a.s, "-i") || strings.HasPrefix(a.s, "--replace="):
			replace = a.s[strings.IndexAny(a.s, "i=")+1:]
		}
		if slices.Contains(withArg, a.s) {
			i++
		}
	}
	rest := slices.Clone(tail(c.args, i))
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

// findCmd judges find: -exec and -ok run a command per file, -delete
// deletes, -fprint writes.
func findCmd(c *call) {
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			continue
		}
		switch a.s {
		case "-delete":
			c.addAs("find -delete", ClassDelete, "deletes files")
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			c.addAs("find "+a.s, ClassWrite, "writes to a file")
		case "-exec", "-execdir", "-ok", "-okdir":
			var inner []arg
			for i++; i < len(c.args); i++ {
				b := c.args[i]
				if b.static && (b.s == ";" || b.s == "+") {
					break
				}
				if strings.Contains(b.s, "{}") {
					b = dynamicArg(b.s)
				}
				inner = append(inner, b)
			}
			if len(inner) == 0 {
				continue
			}
			c.inner(inner, stdinSrc{desc: "the standard input of find"})
		}
	}
}

// sedCmd judges sed: -i writes in place; a script with w, W or e (or the
// w and e flags of s) writes files or runs commands; -f runs a script file.
func sedCmd(c *call) {
	var scripts []arg
	sawScriptOpt := false
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			if !sawScriptOpt && len(scripts) == 0 {
				scripts = append(scripts, a)
				sawScriptOpt = true
			}
			continue
		}
		s := a.s
		switch {
		case s == "--":
			i = len(c.args)
		case s == "--in-place" || strings.HasPrefix(s, "--in-place="):
			c.addAs("sed -i", ClassWrite, "edits files in place")
		case s == "--expression" || s == "--file":
			if s == "--file" {
				c.addAs("sed -f", ClassExec, "runs a sed script file the policy cannot see")
			} else if i+1 < len(c.args) {
				scripts = append(scripts, c.args[i+1])
			}
			sawScriptOpt = true
			i++
		case strings.HasPrefix(s, "--expression="):
			scripts = append(scripts, arg{s: strings.TrimPrefix(s, "--expression="), static: true})
			sawScriptOpt = true
		case strings.HasPrefix(s, "--file="):
			c.addAs("sed -f", ClassExec, "runs a sed script file the policy cannot see")
			sawScriptOpt = true
		case s == "--sandbox":
			// forbids e, w and r: still judged, harmlessly
		case strings.HasPrefix(s, "--"):
		case len(s) > 1 && s[0] == '-':
			for k := 1; k < len(s); k++ {
				switch s[k] {
				case 'i':
					c.addAs("sed -i", ClassWrite, "edits files in place")
					k = len(s) // the rest is the backup suffix
				case 'e', 'f':
					val := s[k+1:]
					if val == "" && i+1 < len(c.args) {
						i++
						val = c.args[i].s
						if !c.args[i].static {
							scripts = append(scripts, c.args[i])
							sawScriptOpt = true
							k = len(s)
							continue
						}
					}
					if s[k] == 'f' {
						c.addAs("sed -f", ClassExec, "runs a sed script file the policy cannot see")
					} else {
						scripts = append(scripts, arg{s: val, static: true})
					}
					sawScriptOpt = true
					k = len(s)
				case 'l':
					if k == len(s)-1 {
						i++
					}
					k = len(s)
				}
			}
		default:
			if !sawScriptOpt {
				scripts = append(scripts, a)
				sawScriptOpt = true
			}
		}
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

// awkCmd judges awk: a program with system(), pipes, output redirection
// or getline may run commands or write files.
func awkCmd(c *call) {
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			c.add(ClassDynamic, fmt.Sprintf("has a program not known until the command runs (`%s`)", short(a.s)))
			return
		}
		s := a.s
		if s == "--" {
			i++
			break
		}
		if s == "-f" || s == "--file" || strings.HasPrefix(s, "-f") && len(s) > 2 || s == "-i" || s == "--include" || s == "-l" || s == "--load" || s == "-E" || s == "--exec" {
			c.add(ClassExec, "runs an awk program file the policy cannot see")
			return
		}
		if s == "-F" || s == "-v" || s == "--assign" || s == "--field-separator" {
			i++
			continue
		}
		if !strings.HasPrefix(s, "-") || s == "-" {
			break
		}
	}
	if i >= len(c.args) {
		return
	}
	prog := c.args[i].s
	for _, bad := range []string{"system", "|", ">", "getline", "@include", "@load", "close", "fflush"} {
		if strings.Contains(prog, bad) {
			c.add(ClassExec, fmt.Sprintf("has a program that may run commands or write files (%s)", bad))
			return
		}
	}
}

// tarCmd lets tar list an archive; anything else writes.
func tarCmd(c *call) {
	list := false
	for k, a := range c.args {
		if !a.static {
			continue
		}
		s := a.s
		for _, bad := range []string{"--to-command", "--checkpoint-action", "--use-compress-program", "--rsh-command", "--info-script", "--new-volume-script", "-I", "-F"} {
			if s == bad || strings.HasPrefix(s, bad+"=") {
				c.add(ClassExec, fmt.Sprintf("runs a command (%s)", bad))
				return
			}
		}
		if s == "--list" || s == "-t" || (k == 0 || strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--")) && strings.IndexByte(s, 't') >= 0 && !strings.ContainsAny(s, "xcrudA") {
			list = true
		}
	}
	if !list {
		c.add(ClassWrite, "creates or extracts files")
	}
}

// ipCmd lets ip show objects; add, del, set, flush and the rest change
// the network configuration.
func ipCmd(c *call) {
	var words []arg
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		if a.static && strings.HasPrefix(a.s, "-") {
			switch a.s {
			case "-n", "-netns", "-f", "-family", "-l", "-loops", "-rc", "-rcvbuf":
				i++
			case "-b", "-batch", "-force":
				c.add(ClassSystem, "runs a batch of ip commands")
				return
			}
			continue
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

// gitCmd classifies git by subcommand.
func gitCmd(c *call) {
	i := 0
	for ; i < len(c.args); i++ {
		a := c.args[i]
		if !a.static {
			c.add(ClassDynamic, "has a subcommand or option not known until the command runs")
			return
		}
		s := a.s
		switch {
		case s == "-C" || s == "--git-dir" || s == "--work-tree" || s == "--namespace":
			i++
		case s == "-c" || strings.HasPrefix(s, "--config-env") || strings.HasPrefix(s, "--exec-path="):
			c.addAs("git "+s, ClassExec, "sets git configuration on the command line, which can make git run commands")
			if s == "-c" {
				i++
			}
		case strings.HasPrefix(s, "-"):
		default:
			goto sub
		}
	}
	return // "git" alone, "git --version"
sub:
	sub := c.args[i].s
	rest := c.args[i+1:]
	name := "git " + sub
	for _, a := range rest {
		if !a.static {
			continue
		}
		if a.s == "--output" || strings.HasPrefix(a.s, "--output=") {
			c.addAs(name+" --output", ClassWrite, "writes its output to a file")
		}
		if a.s == "--upload-pack" || strings.HasPrefix(a.s, "--upload-pack=") || a.s == "--receive-pack" || strings.HasPrefix(a.s, "--receive-pack=") || strings.HasPrefix(a.s, "--exec=") || a.s == "--ext-diff" {
			c.addAs(name+" "+a.s, ClassExec, "makes git run another program")
		}
	}
	first := ""
	if p := positionals(rest); len(p) > 0 {
		first = p[0].s
	}
	has := func(opts ...string) bool {
		return slices.ContainsFunc(rest, func(a arg) bool {
			return a.static && slices.ContainsFunc(opts, func(o string) bool {
				return a.s == o || strings.HasSuffix(o, "=") && strings.HasPrefix(a.s, o) || len(o) == 2 && o[0] == '-' && shortFlag(a.s, o[1])
			})
		})
	}
	switch sub {
	case "log", "show", "diff", "status", "blame", "annotate", "ls-files", "ls-tree", "rev-parse", "rev-list",
		"describe", "shortlog", "cat-file", "whatchanged", "show-ref", "for-each-ref", "name-rev", "merge-base",
		"count-objects", "verify-commit", "verify-tag", "var", "version", "help", "check-ignore", "check-attr",
		"diff-tree", "diff-files", "diff-index", "cherry", "range-diff", "show-branch", "fsck", "grep":
		if sub == "grep" && has("-O", "--open-files-in-pager", "--open-files-in-pager=") {
			c.addAs(name+" -O", ClassExec, "runs a pager command")
		}
	case "reflog":
		if first == "expire" || first == "delete" || first == "drop" {
			c.addAs(name+" "+first, ClassWrite, "changes the repository")
		}
	case "branch":
		if has("-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-f", "--force", "-u", "--set-upstream-to", "--set-upstream-to=", "--unset-upstream", "--edit-description", "-t", "--track", "--track=") ||
			len(positionals(rest)) > 0 && !has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
			c.addAs(name, ClassWrite, "creates, renames or deletes branches")
		}
	case "tag":
		if has("-d", "--delete", "-a", "--annotate", "-s", "--sign", "-u", "--local-user", "--local-user=", "-f", "--force", "-m", "--message", "--message=", "-F", "--file", "--file=") ||
			len(positionals(rest)) > 0 && !has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
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
		if !has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list") && first != "get" && first != "list" {
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
