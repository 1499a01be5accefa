package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/dataset"
	"github.com/monolith-go/monolith/io/tfevents"
	"github.com/monolith-go/monolith/kernels/featstats"
	"github.com/monolith-go/monolith/schemas/batch"
)

// inspectReport is the --json output of inspect.
type inspectReport struct {
	Files    []string                   `json:"files"`
	Source   string                     `json:"source"`
	Records  int64                      `json:"records"`
	Batches  int64                      `json:"batches"`
	Rows     int64                      `json:"rows"`
	Features map[string]*featureSummary `json:"features"`
	order    []string
	stats    map[string]*featstats.Feature
}

type featureSummary struct {
	Kind         string `json:"kind"`
	Fids         int64  `json:"fids"`
	RowsWithFids int64  `json:"rows_with_fids"`
	Slots        []int  `json:"slots"`
	Shared       bool   `json:"shared,omitempty"`
	Rows         int64  `json:"rows"`
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", stderr)
	var in inputFlags
	in.register(fs)
	jsonOut := fs.Bool("json", false, "print a JSON report")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith inspect [flags] FILE|PATTERN...\n\nPrints records, rows and, per feature, fid counts, rows with fids and slots.\n"+
			"When every argument is a TensorBoard event file (events.out.tfevents.*) or a directory\n"+
			"holding some, prints their scalars instead: step, tag, value and wall time, in file order.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if files, ok, err := eventFiles(fs.Args()); err != nil {
		return err
	} else if ok {
		return inspectEvents(files, *jsonOut, stdout)
	}
	opts, err := in.options()
	if err != nil {
		return err
	}
	files, err := expand(ctx, fs.Args())
	if err != nil {
		return err
	}
	r, err := dataset.Open(files, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	prog, err := startProgress(ctx, in.progress, stderr, r.Stats)
	if err != nil {
		return err
	}
	rep := &inspectReport{Files: files, Features: map[string]*featureSummary{}, stats: map[string]*featstats.Feature{}}
	for {
		rec, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			prog.finish()
			return err
		}
		err = rep.add(rec)
		rec.Release()
		if err != nil {
			prog.finish()
			return err
		}
	}
	prog.finish()
	st := r.Stats()
	rep.Records = st.Records
	for name, f := range rep.stats {
		s := rep.Features[name]
		s.Fids, s.RowsWithFids, s.Slots, s.Shared, s.Rows = f.Fids, f.RowsWithFids, f.Slots(), f.Shared, f.Rows
		if s.Slots == nil {
			s.Slots = []int{}
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.print(stdout)
}

// add accumulates one batch.
func (rep *inspectReport) add(rec arrow.RecordBatch) error {
	src, err := batch.SourceOf(rec.Schema())
	if err != nil {
		return err
	}
	switch {
	case rep.Source == "":
		rep.Source = src.String()
	case rep.Source != src.String():
		rep.Source = "mixed"
	}
	rep.Batches++
	rep.Rows += rec.NumRows()
	rows := int(rec.NumRows())
	for i, f := range rec.Schema().Fields() {
		name, kind := f.Name, ""
		isFid := false
		switch batch.RoleOf(f) {
		case batch.RoleFeature:
			k, mixed, err := batch.FeatureKind(f)
			if err != nil {
				return err
			}
			kind = k.String()
			if mixed {
				kind = "mixed"
			}
			isFid = k.IsFid() || k == batch.KindUnset || (mixed && batch.FlatType(f.Type).ID() == arrow.LIST && isFidList(f.Type))
		case batch.RoleLabel, batch.RoleLineID, batch.RoleInstanceWeight:
			list, ok := f.Metadata.GetValue(batch.MetaList)
			if !ok {
				continue // a top-level field, not a feature
			}
			name, kind = list, "float_list"
			if batch.RoleOf(f) == batch.RoleLineID {
				kind = "bytes_list"
			}
		default:
			continue
		}
		s, ok := rep.Features[name]
		if !ok {
			s = &featureSummary{Kind: kind}
			rep.Features[name] = s
			rep.stats[name] = &featstats.Feature{}
			rep.order = append(rep.order, name)
		} else if s.Kind != kind && kind != "unset" {
			if s.Kind == "unset" {
				s.Kind = kind
			} else {
				s.Kind = "mixed"
			}
		}
		st := rep.stats[name]
		if !isFid {
			st.AddRows(rows)
			continue
		}
		sp, err := batch.SparseAt(rec, i)
		if err != nil {
			return err
		}
		st.Add(sp)
	}
	return nil
}

func isFidList(dt arrow.DataType) bool {
	l, ok := batch.FlatType(dt).(*arrow.ListType)
	return ok && l.Elem().ID() == arrow.UINT64
}

func (rep *inspectReport) print(w io.Writer) error {
	fmt.Fprintf(w, "files: %d  source: %s  records: %d  batches: %d  rows: %d  features: %d\n\n",
		len(rep.Files), rep.Source, rep.Records, rep.Batches, rep.Rows, len(rep.Features))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tKIND\tFIDS\tROWS WITH FIDS\tSLOTS")
	for _, name := range rep.order {
		s := rep.Features[name]
		kind := s.Kind
		if s.Shared {
			kind += " (shared)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\n", name, kind, s.Fids, s.RowsWithFids, s.Rows, slotString(s.Slots))
	}
	return tw.Flush()
}

func slotString(slots []int) string {
	if len(slots) <= 6 {
		parts := make([]string, len(slots))
		for i, s := range slots {
			parts[i] = strconv.Itoa(s)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprintf("%d slots in %d..%d", len(slots), slots[0], slots[len(slots)-1])
}

// eventFiles returns the event files of args when every argument is an event file (its
// base name starts with events.out.tfevents.) or a directory holding event files; ok is
// false otherwise, and the arguments are training data.
func eventFiles(args []string) (files []string, ok bool, err error) {
	if len(args) == 0 {
		return nil, false, nil
	}
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, false, nil // a pattern, or missing: the data path reports it
		}
		if !st.IsDir() {
			if !tfevents.IsEventFile(a) {
				return nil, false, nil
			}
			files = append(files, a)
			continue
		}
		found, err := tfevents.Files(a)
		if err != nil {
			return nil, false, err
		}
		if len(found) == 0 {
			return nil, false, nil
		}
		files = append(files, found...)
	}
	return files, true, nil
}

// eventPoint is one scalar in inspect's --json output of event files.
type eventPoint struct {
	File     string    `json:"file"`
	Step     int64     `json:"step"`
	Tag      string    `json:"tag"`
	Value    jsonFloat `json:"value"`
	WallTime float64   `json:"wall_time"`
}

// jsonFloat is a float64 that encodes NaN and infinities as the strings "NaN", "Infinity"
// and "-Infinity" (protobuf JSON's spelling), which JSON numbers cannot hold.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Infinity"`), nil
	}
	return json.Marshal(v)
}

// inspectEvents prints the scalars of event files, in file order: a table or, with
// jsonOut, a JSON array of points. A damaged file stops it with the error (file, offset).
func inspectEvents(files []string, jsonOut bool, w io.Writer) error {
	var pts []eventPoint
	for _, f := range files {
		ps, err := tfevents.ReadFile(f)
		if err != nil {
			return err
		}
		for _, p := range ps {
			pts = append(pts, eventPoint{File: f, Step: p.Step, Tag: p.Tag, Value: jsonFloat(p.Value), WallTime: p.WallTime})
		}
	}
	if jsonOut {
		if pts == nil {
			pts = []eventPoint{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(pts)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTAG\tVALUE\tWALL_TIME")
	for _, p := range pts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Step, p.Tag, formatValue(float64(p.Value)), strconv.FormatFloat(p.WallTime, 'f', 3, 64))
	}
	return tw.Flush()
}

// formatValue prints v in the fewest digits that read back the same, at float32
// precision when v is a float32 (simple_value), so 0.1f prints as 0.1.
func formatValue(v float64) string {
	if float64(float32(v)) == v {
		return strconv.FormatFloat(v, 'g', -1, 32)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
