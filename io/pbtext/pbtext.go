package pbtext

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/schemas/examplepb"
	"github.com/monolith-go/monolith/schemas/parserpb"
)

// Format is a textual protobuf encoding.
type Format int

const (
	// Text is the protobuf text format (.pbtxt, .pbtext, .textproto, .txtpb, .txt).
	Text Format = iota + 1
	// JSON is protobuf JSON (.json).
	JSON
)

// String returns "text" or "json".
func (f Format) String() string {
	switch f {
	case Text:
		return "text"
	case JSON:
		return "json"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// ErrUnknownFormat reports a file extension that names no supported format.
var ErrUnknownFormat = errors.New("io/pbtext: unknown format")

// FormatOf returns the format a file name's extension implies (case-insensitive).
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pbtxt", ".pbtext", ".textproto", ".txtpb", ".txt", ".prototxt":
		return Text, nil
	case ".json":
		return JSON, nil
	}
	return 0, fmt.Errorf("%w: %s (want .pbtxt, .pbtext, .textproto, .txtpb, .txt, .prototxt or .json)",
		ErrUnknownFormat, path)
}

// Error reports input the protobuf library could not parse.
type Error struct {
	File   string // the file name, or "" for in-memory input
	Format Format
	Line   int // 1-based line reported by the library, or 0
	Column int // 1-based column reported by the library, or 0
	Err    error
}

var (
	posRE     = regexp.MustCompile(`\(line (\d+):(\d+)\)`)
	posTrimRE = regexp.MustCompile(`\s*\(line \d+:\d+\)`)
)

// Error formats the error as "io/pbtext: file:line:column: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("io/pbtext: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	} else {
		b.WriteString(e.Format.String())
		b.WriteString(" input:")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Column)
	}
	b.WriteString(" ")
	b.WriteString(cleanMessage(e.Err))
	return b.String()
}

// cleanMessage drops the library's "proto:" prefix and "(line l:c)" marker, which Error
// already renders.
func cleanMessage(err error) string {
	if err == nil {
		return "<nil>"
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "proto:"); ok {
		msg = strings.TrimLeft(rest, " \u00a0")
	}
	msg = posTrimRE.ReplaceAllString(msg, "")
	msg = strings.Join(strings.Fields(msg), " ")
	msg = strings.TrimPrefix(msg, ": ")
	return msg
}

// Unwrap returns the library's error.
func (e *Error) Unwrap() error { return e.Err }

func newError(file string, f Format, err error) error {
	e := &Error{File: file, Format: f, Err: err}
	if m := posRE.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Column, _ = strconv.Atoi(m[2])
	}
	return e
}

// Unmarshal decodes b in format f into msg. name is used in errors (may be "").
func Unmarshal(name string, b []byte, f Format, msg proto.Message) error {
	var err error
	switch f {
	case Text:
		err = prototext.Unmarshal(b, msg)
	case JSON:
		err = protojson.Unmarshal(b, msg)
	default:
		return fmt.Errorf("%w: %v", ErrUnknownFormat, f)
	}
	if err != nil {
		return newError(name, f, err)
	}
	return nil
}

// ReadText decodes the protobuf text format in b into msg.
func ReadText(b []byte, msg proto.Message) error { return Unmarshal("", b, Text, msg) }

// ReadJSON decodes protobuf JSON in b into msg.
func ReadJSON(b []byte, msg proto.Message) error { return Unmarshal("", b, JSON, msg) }

// ReadFile decodes the file at path into msg, choosing the format by extension
// ([FormatOf]).
func ReadFile(path string, msg proto.Message) error {
	f, err := FormatOf(path)
	if err != nil {
		return err
	}
	return ReadFileAs(path, f, msg)
}

// ReadFileAs decodes the file at path, in format f, into msg.
func ReadFileAs(path string, f Format, msg proto.Message) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("io/pbtext: %w", err)
	}
	return Unmarshal(path, b, f, msg)
}

// ReadInstanceFile reads a parser.proto.Instance from a .pbtxt/.pbtext or .json file.
func ReadInstanceFile(path string) (*parserpb.Instance, error) {
	m := &parserpb.Instance{}
	if err := ReadFile(path, m); err != nil {
		return nil, err
	}
	return m, nil
}

// ReadExampleFile reads a monolith.io.proto.Example from a .pbtxt/.pbtext or .json file.
func ReadExampleFile(path string) (*examplepb.Example, error) {
	m := &examplepb.Example{}
	if err := ReadFile(path, m); err != nil {
		return nil, err
	}
	return m, nil
}

// ReadExampleBatchFile reads a monolith.io.proto.ExampleBatch from a .pbtxt/.pbtext or
// .json file.
func ReadExampleBatchFile(path string) (*examplepb.ExampleBatch, error) {
	m := &examplepb.ExampleBatch{}
	if err := ReadFile(path, m); err != nil {
		return nil, err
	}
	return m, nil
}

// ReadFeatureConfigsFile reads a monolith.io.proto.FeatureConfigs: JSON from a .json
// file, protobuf text from any other name (Monolith's configs come as .pbtxt, .conf and
// more). kernels/featcfg.New preprocesses the result.
func ReadFeatureConfigsFile(path string) (*examplepb.FeatureConfigs, error) {
	f := Text
	if strings.EqualFold(filepath.Ext(path), ".json") {
		f = JSON
	}
	m := &examplepb.FeatureConfigs{}
	if err := ReadFileAs(path, f, m); err != nil {
		return nil, err
	}
	return m, nil
}
