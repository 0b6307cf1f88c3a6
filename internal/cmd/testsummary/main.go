// Command testsummary reads the test2json events of `go test -json` on
// standard input and prints what `go test` prints without -json — each
// package's result line, the output of failed tests and packages, build
// errors — followed by a summary: every skipped test with its package and
// the reason it gave, every failed test, and the totals. .ci/run pipes the
// suite through it so that a skip is seen, not only counted.
//
//	go test -json ./... | testsummary
//
// It exits 1 when a test, a package or a build failed, or the input ended
// with a package unfinished; the summary is printed either way. Lines of
// the input that are not test2json events are passed through unchanged.
//
// Standard library only; imports no toolagent package.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	err := run(os.Stdin, os.Stdout)
	if err != nil && !errors.Is(err, errFailed) {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
	}
	if err != nil {
		os.Exit(1)
	}
}

// errFailed says the input reported a failure; the output says which.
var errFailed = errors.New("tests failed")

// run copies the events on in to out as go test would print them, then the
// summary; it returns errFailed when anything failed.
func run(in io.Reader, out io.Writer) error {
	s := newSummarizer(out)
	if err := s.read(in); err != nil {
		return err
	}
	if !s.finish().ok() {
		return errFailed
	}
	return nil
}
