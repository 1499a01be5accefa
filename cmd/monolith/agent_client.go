package main

import (
	"context"
	"errors"
	"io"
)

// runAgentClient is `monolith agent-client`.
func runAgentClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented: the serving agent client (issue 8)")
}
