package cli

import (
	"fmt"
	"io"
	"strings"
)

// Command is a subcommand as completion offers it.
type Command struct {
	Name, Summary string
	// Flags are its flags, as --name.
	Flags []string
}

// Shells are the shells Completion writes scripts for.
var Shells = []string{"bash", "zsh", "fish"}

// Completion writes a completion script of the toolagent command for
// shell (one of Shells): subcommands, then each subcommand's flags, then
// file names.
func Completion(w io.Writer, shell string, cmds []Command) {
	var names []string
	flags := map[string][]string{}
	for _, c := range cmds {
		names = append(names, c.Name)
		flags[c.Name] = c.Flags
	}
	switch shell {
	case "bash", "zsh":
		if shell == "zsh" {
			fmt.Fprintln(w, "# zsh: load with  source <(toolagent completion zsh)")
			fmt.Fprintln(w, "autoload -U +X bashcompinit && bashcompinit")
		} else {
			fmt.Fprintln(w, "# bash: load with  source <(toolagent completion bash)")
		}
		fmt.Fprintln(w, "_toolagent() {")
		fmt.Fprintln(w, `  local cur=${COMP_WORDS[COMP_CWORD]}`)
		fmt.Fprintln(w, `  if [ "$COMP_CWORD" -eq 1 ]; then`)
		fmt.Fprintf(w, "    COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n", strings.Join(names, " "))
		fmt.Fprintln(w, "  fi")
		fmt.Fprintln(w, `  case "${COMP_WORDS[1]}" in`)
		for _, n := range names {
			if len(flags[n]) == 0 {
				continue
			}
			fmt.Fprintf(w, "    %s) [[ $cur == -* ]] && { COMPREPLY=($(compgen -W %q -- \"$cur\")); return; } ;;\n", n, strings.Join(flags[n], " "))
		}
		fmt.Fprintln(w, "  esac")
		fmt.Fprintln(w, `  COMPREPLY=($(compgen -f -- "$cur"))`)
		fmt.Fprintln(w, "}")
		fmt.Fprintln(w, "complete -o filenames -F _toolagent toolagent")
	case "fish":
		fmt.Fprintln(w, "# fish: load with  toolagent completion fish | source")
		fmt.Fprintln(w, "complete -c toolagent -f")
		for _, c := range cmds {
			fmt.Fprintf(w, "complete -c toolagent -n __fish_use_subcommand -a %s -d %s\n", c.Name, fishQuote(c.Summary))
		}
		for _, n := range names {
			for _, f := range flags[n] {
				fmt.Fprintf(w, "complete -c toolagent -n '__fish_seen_subcommand_from %s' -l %s\n", n, strings.TrimPrefix(f, "--"))
			}
		}
	}
}

func fishQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
