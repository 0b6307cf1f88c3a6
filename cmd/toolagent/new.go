package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/toolagent/toolagent/internal/cli"
	"github.com/toolagent/toolagent/internal/hldp"
	"github.com/toolagent/toolagent/internal/host"
)

var toolNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// scaffold is the TOOL.hdlp `toolagent new` writes: every field, a working
// shell run tool, comments saying what to change.
const scaffold = `# %[1]s — scaffolded by toolagent new; edit every field, then run
# toolagent validate and commit. The format is documented in docs/tool-format.md.
name: %[1]s
display: %[1]s
intent: One sentence saying what the tool does (this is what intent search matches).
method: run
executor: shell
# argv: the command and its arguments; {param} becomes exactly one argument,
# never passed to a shell. A [group] is left out when its params are absent.
argv: [echo, "{message}", ["--", "{extra}"]]
params_schema:
  message: { type: string, required: true, description: "what to echo" }
  extra: { type: string, required: false, description: "an optional second argument" }
constraints:
  timeout_ms: 30000
  max_output_bytes: 65536
  require_confirm: false
keywords: []
# examples: requests, in any language, this tool answers: the strongest
# words for intent search (toolagent validate --match checks they find it).
examples:
  - "echo a message back"
  - "回显一条消息"
# tags: lowercase words for filtering and scoped tokens (list --tag).
tags: [example]
# requires: what must exist on this host for the tool to be offered;
# without it the tool is disabled, with the reason.
requires:
  programs: [echo]
author: %[2]s
created: %[3]s
why: Why the tool exists and who needs it.
`

func runNew(ctx context.Context, e env, args []string) error {
	var c common
	fs := newFlagSet("new", e)
	c.register(fs, e)
	author := fs.String("author", e.getenv("USER"), "author written into the definition")
	pos, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{Err: errors.New("new: want exactly one tool NAME")}
	}
	name := pos[0]
	if !toolNameRE.MatchString(name) {
		return usageError{Err: fmt.Errorf("new: tool name %q: want lower-case letters, digits, - and _, starting with a letter or digit", name)}
	}
	if err := c.resolve(e); err != nil {
		return err
	}
	if c.Tools == host.Embedded {
		return usageError{Err: errors.New("new: no tools directory found; give --tools DIR")}
	}
	if *author == "" {
		*author = "unknown"
	}
	data := fmt.Sprintf(scaffold, name, *author, time.Now().Format(time.DateOnly))
	file := filepath.Join(c.Tools, name, hldp.FileName)
	if _, err := hldp.Parse(filepath.Join("tools", name, hldp.FileName), []byte(data)); err != nil {
		return fmt.Errorf("new: the scaffold does not validate (a bug): %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return exitError{code: exitFailed, msg: fmt.Sprintf("new: %s already exists; not overwriting it", file)}
		}
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "created %s\n", file)
	return nil
}
