package mcpserver

import (
	"bytes"
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolagent/toolagent/internal/runs"
)

// maxProgressMessage bounds a progress notification's message.
const maxProgressMessage = 200

// progress sends notifications/progress for one tools/call whose client
// gave a progress token: the latest line the tool wrote (stdout or
// stderr) as the message, and the count of lines so far as the progress;
// once the tool reports its own progress (a "TOOLAGENT_PROGRESS N[/TOTAL]
// message" line on stderr), its reports instead.
// Sending happens on a goroutine of its own, latest-wins, so a slow
// client never holds up the tool's output pipes.
type progress struct {
	ss    *mcp.ServerSession
	token any

	mu       sync.Mutex
	lines    float64
	reported float64           // the tool's last progress report
	partial  map[string][]byte // per stream: the unfinished last line
	latest   *mcp.ProgressNotificationParams
	wake     chan struct{}
	done     chan struct{}
	stopped  chan struct{}
}

// startProgress returns the output hook that reports progress for req,
// and a stop function to call when the call ended; nil, no-op when the
// client asked for no progress.
func startProgress(ctx context.Context, req *mcp.CallToolRequest) (func(stream string, p []byte), func()) {
	if req == nil || req.Session == nil || req.Params == nil || req.Params.GetProgressToken() == nil {
		return nil, func() {}
	}
	pr := &progress{ss: req.Session, token: req.Params.GetProgressToken(), partial: map[string][]byte{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go pr.send(context.WithoutCancel(ctx))
	return pr.output, func() {
		close(pr.done)
		<-pr.stopped
	}
}

// output takes a chunk of the tool's output.
func (pr *progress) output(stream string, p []byte) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	buf := append(pr.partial[stream], p...)
	i := bytes.LastIndexByte(buf, '\n')
	if i < 0 {
		pr.partial[stream] = buf[max(0, len(buf)-4*maxProgressMessage):]
		return
	}
	complete := buf[:i]
	pr.lines += float64(bytes.Count(complete, []byte{'\n'}) + 1)
	line := complete[bytes.LastIndexByte(complete, '\n')+1:]
	pr.partial[stream] = append([]byte(nil), buf[i+1:]...)
	msg := string(bytes.TrimSpace(line))
	if len(msg) > maxProgressMessage {
		msg = msg[:maxProgressMessage]
	}
	n := &mcp.ProgressNotificationParams{ProgressToken: pr.token, Progress: pr.lines, Message: msg}
	// A progress report of the tool's own (runs.ProgressPrefix on
	// stderr) gives the numbers instead of the line count; it must only
	// go up, as MCP asks.
	if p, total, m, ok := runs.ParseProgress(string(line)); ok && stream == runs.EventStderr && p > pr.reported {
		pr.reported = p
		n = &mcp.ProgressNotificationParams{ProgressToken: pr.token, Progress: p, Total: total, Message: m}
	} else if pr.reported > 0 {
		return // once the tool reports, only its reports count
	}
	pr.latest = n
	select {
	case pr.wake <- struct{}{}:
	default:
	}
}

// send delivers the latest notification whenever there is a new one,
// until the call ends.
func (pr *progress) send(ctx context.Context) {
	defer close(pr.stopped)
	for {
		ended := false
		select {
		case <-pr.done:
			ended = true // the last line still goes, before the result
		case <-pr.wake:
		}
		pr.mu.Lock()
		n := pr.latest
		pr.latest = nil
		pr.mu.Unlock()
		if n != nil {
			_ = pr.ss.NotifyProgress(ctx, n)
		}
		if ended {
			return
		}
	}
}
