package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/monolith-go/monolith/io/dataset"
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
		fmt.Fprintln(fs.Output(), "usage: monolith inspect [flags] FILE|PATTERN...\n\nPrints records, rows and, per feature, fid counts, rows with fids and slots.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
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
