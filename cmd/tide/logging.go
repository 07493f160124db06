package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger is the slog logger of serve and dev: --log-level (debug, info,
// warn, error) and --log-format (text, or json for a log collector).
func newLogger(out io.Writer, level, format string) (*slog.Logger, error) {
	var parsed slog.Level
	if err := parsed.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", level)}
	}
	options := &slog.HandlerOptions{Level: parsed}
	switch format {
	case "text", "": // text is the default
		return slog.New(slog.NewTextHandler(out, options)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(out, options)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format %q: want text or json", format)}
}
