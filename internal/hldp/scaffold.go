package hldp

import (
	"encoding/json"
	"fmt"
	"time"
)

// scaffold is the TOOL.hdlp of Scaffold.
const scaffold = `# %[1]s — scaffolded by toolagent new; edit every field, then run
# toolagent validate and commit. Until intent and why say something of their
# own the file does not load (validate names them), so nothing serves it. The format is documented in docs/tool-format.md.
name: %[1]s
display: %[1]s
intent: %[4]s
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
why: %[5]s
`

// The placeholders Scaffold writes for intent and why when it is given
// none: a file that still holds one does not load (ErrPlaceholder's
// diagnostic), so a daemon never serves an unedited scaffold.
const (
	ScaffoldIntent = "One sentence saying what the tool does (this is what intent search matches)."
	ScaffoldWhy    = "Why the tool exists and who needs it."
)

// Scaffold is the TOOL.hdlp `toolagent new` writes for a tool name by
// author on the day created: every field, a working shell run tool,
// comments saying what to change. intent and why are written as given
// (JSON-quoted, which YAML reads), or as the placeholders when "": then
// the file does not load until they are edited (a test says so).
func Scaffold(name, author, intent, why string, created time.Time) string {
	return fmt.Sprintf(scaffold, name, author, created.Format(time.DateOnly), yamlText(intent, ScaffoldIntent), yamlText(why, ScaffoldWhy))
}

// yamlText is s as a YAML double-quoted scalar, or placeholder as it is.
func yamlText(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	b, _ := json.Marshal(s)
	return string(b)
}
