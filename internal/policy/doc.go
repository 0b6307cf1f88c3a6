// Package policy decides whether a tool call may run now (Allow), needs an
// approver first (Confirm) or never runs (Deny), and always says which rule
// decided and why (Verdict).
//
// Two kinds of rules feed a verdict:
//
//   - Per-argument rules from TOOL.hdlp (ParamRules): deny, allow and confirm
//     regular expressions per param, so one tool can run reads freely and
//     ask before writes.
//   - For method exec, the shell policy (ShellPolicy): the cmd param is
//     parsed with mvdan.cc/sh/v3/syntax and every simple command in it is
//     judged, including those inside pipelines, lists, subshells, command
//     substitutions, here-documents fed to a shell, sh -c and eval strings,
//     and the commands run by wrappers such as sudo, env, xargs and
//     find -exec; redirections to files count as writes. A command that
//     cannot be parsed is denied.
//
// The TOOL.hdlp syntax (parsed by hldp into Rules):
//
//	constraints:
//	  require_confirm: false
//	  rules:
//	    cmd: { deny: ["rm\\s+-rf"], confirm: ["^git push"], allow: [] }
//	    target: { allow: ["^(dev|staging)$"], confirm: ["^prod$"] }
//	  shell_policy: default      # default | strict | none (method exec only)
//
// POLICY.md in this directory documents the semantics, the built-in
// default policy's command lists and how an operator overrides it.
//
// Where it is used: dispatch calls Evaluate before running a call (Confirm
// turns into an approval request); the shell executor and the gatekeeper
// server call Recheck or CheckCommand right before starting a process, so
// a call that reaches them without a required approval is refused with a
// *RefusedError naming the rule.
//
// Nothing here does I/O or holds mutable package state; ShellPolicy and
// compiled Rules are read-only and safe for concurrent use.
//
// Imports: hldp only. Imported by dispatch, executors/shell and gatekeeper.
package policy
