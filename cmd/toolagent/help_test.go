package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHelpStyle: every subcommand's -h prints its synopsis and flags on
// stdout and exits 0 (no "flag: help requested"), in one style: each flag
// once, as --name, its default written once, the same way.
func TestHelpStyle(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, c.name, "-h")
			if code != 0 || errOut != "" {
				t.Errorf("%s -h = exit %d, stderr %q; want 0 and nothing on stderr", c.name, code, errOut)
			}
			if !strings.HasPrefix(out, "usage: toolagent "+c.name) {
				t.Errorf("%s -h does not start with its synopsis:\n%s", c.name, out)
			}
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "-") && !strings.HasPrefix(l, "  --") {
					t.Errorf("%s -h: flag line %q is not written as --name", c.name, l)
				}
				f := strings.Fields(l)
				meaning := strings.TrimPrefix(strings.TrimSpace(l), strings.Join(f[:min(len(f), 1)], ""))
				if strings.Count(meaning, "default ") > 1 || strings.Contains(meaning, "(default false)") || strings.Contains(meaning, "(default) ") {
					t.Errorf("%s -h: default written twice or another way: %q", c.name, l)
				}
			}
		})
	}
	// Flags a subcommand does not use are not offered.
	for cmd, absent := range map[string][]string{"list": {"--sandbox", "--files-root"}, "show": {"--sandbox"}, "sync": {"--listen", "--tokens-file", "--sandbox"}, "status": {"--tools"}} {
		out, _, _ := runCLI(t, nil, cmd, "-h")
		for _, f := range absent {
			if strings.Contains(out, "  "+f+" ") {
				t.Errorf("%s -h offers %s, which it does not use", cmd, f)
			}
		}
	}
}

// TestDidYouMean: a mistyped subcommand names the closest one; a bad flag
// says which subcommand's help lists the flags; a bad --listen says the
// address is bad.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	for typed, want := range map[string]string{"lsit": "list", "calll": "call", "approve": "approvals", "sevre": "serve"} {
		if _, errOut, code := runCLI(t, nil, typed); code != exitUsage || !strings.Contains(errOut, `did you mean "`+want+`"`) {
			t.Errorf("toolagent %s = exit %d %q; want 2 and did you mean %q", typed, code, errOut, want)
		}
	}
	if _, errOut, code := runCLI(t, nil, "zzzzzz"); code != exitUsage || strings.Contains(errOut, "did you mean") {
		t.Errorf("toolagent zzzzzz = exit %d %q; want 2 and no guess", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "call", "--bogus"); code != exitUsage || !strings.Contains(errOut, "toolagent call -h") {
		t.Errorf("call --bogus = exit %d %q; want 2, pointing at call -h", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "serve", "--listen", "nope"); code != exitFailed || !strings.Contains(errOut, `listen "nope": want host:port`) {
		t.Errorf("serve --listen nope = exit %d %q; want the address named as bad", code, errOut)
	}
}

// TestCompletion: the scripts name every subcommand and each one's own
// flags, and bash (and zsh, when installed) accept them.
func TestCompletion(t *testing.T) {
	t.Parallel()
	out, _, code := runCLI(t, nil, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash = exit %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(out, c.name) {
			t.Errorf("bash completion lacks %s", c.name)
		}
	}
	if !strings.Contains(out, "call) [[ $cur == -* ]] && { COMPREPLY=($(compgen -W \"--approval-ttl --dry-run") {
		t.Errorf("bash completion does not offer call's flags:\n%s", out)
	}
	for _, sh := range []string{"bash", "zsh"} {
		script, _, _ := runCLI(t, nil, "completion", sh)
		path, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s not installed: its script is not syntax-checked", sh)
			continue
		}
		cmd := exec.Command(path, "-n")
		cmd.Stdin = strings.NewReader(script)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s -n on the %s completion: %v\n%s", sh, sh, err, b)
		}
	}
	fish, _, code := runCLI(t, nil, "completion", "fish")
	if code != 0 || !strings.Contains(fish, "complete -c toolagent -n '__fish_seen_subcommand_from call' -l dry-run") {
		t.Errorf("fish completion = exit %d, lacks call's --dry-run:\n%s", code, fish)
	}
	if _, _, code := runCLI(t, nil, "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh = exit %d; want 2", code)
	}
}
