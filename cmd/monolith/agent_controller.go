package main

import (
	"context"
	"errors"
	"io"
)

// runAgentController is `monolith agent-controller`.
func runAgentController(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented: the serving agent controller (issue 8)")
}

// runFakeExport is `monolith fake-export`.
func runFakeExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not implemented: fake exported models (issue 8)")
}
