package host

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// ReadSecret reads a token from file: its content without surrounding
// whitespace. The token itself never appears in an error or a log.
func ReadSecret(what, file string, log *slog.Logger) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("%s token file: %w", what, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("token file is readable by other users; chmod 600 it", "file", file, "mode", fi.Mode().Perm().String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s token file: %w", what, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("%s token file %s is empty", what, file)
	}
	return tok, nil
}
