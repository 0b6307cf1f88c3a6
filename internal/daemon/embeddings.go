package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/toolagent/toolagent/internal/catalog"
	"github.com/toolagent/toolagent/internal/embed"
	"github.com/toolagent/toolagent/internal/host"
)

// embeddingsCacheFile is the tools' vectors beside the parse cache.
const embeddingsCacheFile = "embeddings.cache"

// newEmbeddings returns the embeddings backend match_embeddings
// configures, or nil without one. Its key comes from the environment or
// its file, never from a flag or the config file, and never reaches a log.
func newEmbeddings(cfg Config, state string, log *slog.Logger) (*embed.Matcher, error) {
	if cfg.EmbeddingsURL == "" {
		return nil, nil
	}
	key := cfg.EmbeddingsKey
	if cfg.EmbeddingsKeyFile != "" {
		var err error
		if key, err = host.ReadSecret("match_embeddings", cfg.EmbeddingsKeyFile, log); err != nil {
			return nil, err
		}
	}
	dir := filepath.Dir(host.CacheFile(state))
	cacheFile := ""
	if err := os.MkdirAll(dir, 0o700); err == nil {
		cacheFile = filepath.Join(dir, embeddingsCacheFile)
	}
	return embed.New(embed.Options{URL: cfg.EmbeddingsURL, Model: cfg.EmbeddingsModel, Key: key, Timeout: cfg.EmbeddingsTimeout,
		Weight: cfg.EmbeddingsWeight, Languages: cfg.EmbeddingsLanguages, CacheFile: cacheFile, Log: log.With(slog.String("log", "embeddings"))})
}

// matchFunc is how the API and MCP answer intent queries: through the
// embeddings backend when one is configured, else nil (the lexical
// matcher alone).
func (cr *core) matchFunc() catalog.MatchFunc {
	if cr.embed == nil {
		return nil
	}
	return cr.embed.Match
}

// watchEmbeddings keeps the tools' vectors current until ctx ends.
func (cr *core) watchEmbeddings(ctx context.Context) error {
	if cr.embed != nil {
		cr.embed.Watch(ctx, cr.store)
	}
	return nil
}
