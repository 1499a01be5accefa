package main

import (
	"context"
	"errors"
	"io"
)

// runAgent is `monolith agent`.
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented: the serving agent (issue 8)")
}
