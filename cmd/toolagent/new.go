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
	data := hldp.Scaffold(name, *author, time.Now())
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
			return exitError{Code: exitFailed, Msg: fmt.Sprintf("new: %s already exists; not overwriting it", file)}
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
