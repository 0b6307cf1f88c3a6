// Command benchrelay is the floor scripts/bench-stream.sh measures the
// daemon's stream against: an HTTP server on loopback that, for each
// request, runs one command and writes its standard output to the
// response as it reads it, with nothing else — no JSON, no events, no
// run kept, no sandbox, no authentication. It reads the child's pipe as
// the daemon does (a 256 KiB pipe and buffer) and flushes each read. No
// HTTP server that streams a child's output can do less work a byte, so
// the time it takes is what the daemon's stream is measured beside. It is
// a development tool, not part of the product binary:
//
//	go build -o /var/tmp/benchrelay ./internal/cmd/benchrelay
//	/var/tmp/benchrelay seq 1 6000000     # prints: listening 127.0.0.1:PORT
//	curl -sN http://127.0.0.1:PORT/ -o out
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: benchrelay [--listen ADDR] COMMAND [ARG...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrelay:", err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	fmt.Fprintln(os.Stderr, "benchrelay:", http.Serve(ln, relay(flag.Args())))
	os.Exit(1)
}

// pipeSize is the child's stdout pipe buffer and the read size, as the
// daemon's for a followed call (internal/proc's streamPipeSize).
const pipeSize = 256 << 10

// relay answers every request with argv's standard output, as it comes.
func relay(argv []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr, pw, err := os.Pipe()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer pr.Close()
		_, _ = unix.FcntlInt(pr.Fd(), unix.F_SETPIPE_SZ, pipeSize)
		cmd := exec.CommandContext(r.Context(), argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = pw, os.Stderr
		err = cmd.Start()
		pw.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		rc := http.NewResponseController(w)
		buf := make([]byte, pipeSize)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
					break // the client went away: the context ends the child
				}
			}
			if err != nil {
				break
			}
		}
		_ = cmd.Wait()
	})
}
