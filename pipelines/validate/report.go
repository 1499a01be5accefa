package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/proto"

	"github.com/monolith-go/monolith/io/featurelist"
	"github.com/monolith-go/monolith/kernels/featstats"
	"github.com/monolith-go/monolith/schemas/examplepb"
)

// Inputs names what a run validated.
type Inputs struct {
	Pattern        string   `json:"pattern"`                // --input
	Files          []string `json:"files"`                  // the files the pattern matched
	FeatureConfigs string   `json:"feature_configs"`        // --feature-configs
	FeatureList    string   `json:"feature_list,omitempty"` // --feature-list
}

// Report is the result of a validation run. Its JSON form is the report file.
type Report struct {
	Status  Status `json:"status"` // Fail if any check failed, else Warn if any warned, else Pass
	Inputs  Inputs `json:"inputs"`
	PS      int    `json:"ps_num"`
	Version int    `json:"version"`
	Unique  bool   `json:"unique"`
	Files   int    `json:"files"`
	Batches int64  `json:"batches"`
	Rows    int64  `json:"rows"`
	// HistBuckets labels the buckets of FeatureReport.FidsPerRow (featstats buckets: 0 fids,
	// 1, 2-3, 4-7, ...; the last is open).
	HistBuckets []string          `json:"hist_buckets"`
	Checks      []CheckResult     `json:"checks"` // in catalog order
	Features    []FeatureReport   `json:"features"`
	Layouts     []LayoutReport    `json:"layouts"`
	byFeature   map[string]Status // worst finding per feature
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"` // "static" or "data"
	Title    string    `json:"title"`
	Status   Status    `json:"status"`
	Summary  string    `json:"summary"`
	Findings []Finding `json:"findings"`
}

// FeatureReport holds the data statistics of one configured feature.
type FeatureReport struct {
	Name         string   `json:"name"`
	Table        string   `json:"table"`
	Pooling      string   `json:"pooling"`
	Dim          int      `json:"dim"`
	Layouts      []string `json:"layouts"` // layouts with a slice of the feature
	Status       Status   `json:"status"`  // worst finding naming the feature
	ExpectedSlot int      `json:"expected_slot"`
	SlotSource   string   `json:"slot_source,omitempty"` // "feature list" or "name"

	Rows         int64   `json:"rows"`
	Fids         int64   `json:"fids"`
	RowsWithFids int64   `json:"rows_with_fids"`
	Coverage     float64 `json:"coverage"`     // RowsWithFids / Rows
	FidsPerRow   []int64 `json:"fids_per_row"` // histogram over HistBuckets

	Slots            []SlotCount `json:"slots"`
	SlotMismatches   int64       `json:"slot_mismatches"`
	MismatchExamples []string    `json:"mismatch_examples"` // hex fids

	SharedRows     int64 `json:"shared_rows"`
	IndividualRows int64 `json:"individual_rows"`
	AbsentRows     int64 `json:"absent_rows"`
}

// LayoutReport holds the layout check of one layout.
type LayoutReport struct {
	Name     string  `json:"name"`
	OutType  string  `json:"out_type"`
	Shapes   [][]int `json:"shapes"`
	Status   Status  `json:"status"` // Skip when the layout did not run
	Runs     int64   `json:"runs"`
	Failures int64   `json:"failures"`
	Failure  string  `json:"failure,omitempty"` // an example
	Skipped  string  `json:"skipped,omitempty"` // why it did not run
}

// Build runs the static checks on fc and opts, reads the data checks from acc (nil skips
// them) and returns the report. acc must come from NewAccumulator(fc, opts).
func Build(in Inputs, fc *examplepb.FeatureConfigs, opts Options, acc *Accumulator) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.resolved()
	if acc != nil && acc.st.Config != nil {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fc)
		if err != nil {
			return nil, fmt.Errorf("pipelines/validate: feature configs: %w", err)
		}
		if !bytes.Equal(b, acc.st.Config) || acc.st.PS != opts.PS || acc.st.Version != opts.Version || acc.st.Unique != opts.Unique {
			return nil, errors.New("pipelines/validate: the accumulator comes from other feature configs or options")
		}
	} else {
		acc = nil
	}
	r := &Report{Inputs: in, PS: opts.PS, Version: opts.Version, Unique: opts.Unique, Files: len(in.Files),
		HistBuckets: histLabels(), byFeature: map[string]Status{}}
	if r.Inputs.Files == nil {
		r.Inputs.Files = []string{}
	}
	findings := map[string][]Finding{}
	badLayouts := map[string]bool{} // layouts with a static problem of their own
	for _, f := range Static(fc, opts) {
		findings[f.Check] = append(findings[f.Check], f)
		if f.Layout != "" {
			badLayouts[f.Layout] = true
		}
	}
	if acc != nil {
		r.Batches, r.Rows = acc.st.Batches, acc.st.Rows
		for _, f := range dataFindings(&acc.st) {
			findings[f.Check] = append(findings[f.Check], f)
		}
	}
	r.Status = Pass
	for _, c := range catalog {
		cr := CheckResult{ID: c.id, Kind: c.kind, Title: c.title, Findings: findings[c.id], Status: Pass}
		if cr.Findings == nil {
			cr.Findings = []Finding{}
		}
		nf, nw := 0, 0
		for _, f := range cr.Findings {
			cr.Status = worse(cr.Status, f.Status)
			if f.Status == Fail {
				nf++
			} else {
				nw++
			}
			if f.Feature != "" {
				r.byFeature[f.Feature] = worse(r.byFeature[f.Feature], f.Status)
			}
		}
		switch {
		case c.kind == "data" && acc == nil:
			cr.Status, cr.Summary = Skip, "skipped: no data pass"
		case (c.id == CheckFeatureList || c.id == CheckSlotConflict || c.id == CheckSlotName) && opts.FeatureList == nil:
			cr.Status, cr.Summary = Skip, "skipped: no --feature-list"
		case c.id == CheckLayout && acc.st.LayoutSkip != "":
			cr.Status, cr.Summary = Skip, "skipped: "+acc.st.LayoutSkip
		case nf+nw == 0:
			cr.Summary = "passed"
		default:
			cr.Summary = counts(nf, nw)
		}
		if c.id == CheckLayout && acc != nil && acc.st.LayoutSkip == "" {
			s := fmt.Sprintf("ran %d layouts on %d batches", len(acc.st.Layouts), acc.st.LayoutBatches)
			if len(acc.st.LayoutsSkipped) > 0 {
				s += fmt.Sprintf("; skipped %d invalid layouts: %s", len(acc.st.LayoutsSkipped), strings.Join(acc.st.LayoutsSkipped, ", "))
			}
			if nf+nw > 0 {
				s += "; " + counts(nf, nw)
			}
			cr.Summary = s
		}
		if cr.Status != Skip {
			r.Status = worse(r.Status, cr.Status)
		}
		r.Checks = append(r.Checks, cr)
	}
	r.features(fc, acc)
	r.layouts(fc, acc, badLayouts)
	return r, nil
}

// counts renders "n failed, m warnings".
func counts(nf, nw int) string {
	var parts []string
	if nf > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", nf))
	}
	if nw > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", nw, plural(nw, "warning", "warnings")))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// histLabels returns the labels of the featstats buckets.
func histLabels() []string {
	out := make([]string, featstats.HistBuckets)
	out[0] = "0"
	for b := 1; b < featstats.HistBuckets; b++ {
		lo, hi := 1<<(b-1), 1<<b-1
		switch {
		case b == featstats.HistBuckets-1:
			out[b] = strconv.Itoa(lo) + "+"
		case lo == hi:
			out[b] = strconv.Itoa(lo)
		default:
			out[b] = fmt.Sprintf("%d-%d", lo, hi)
		}
	}
	return out
}

// dataFindings derives the data-check findings from an accumulated state.
func dataFindings(st *state) []Finding {
	var out []Finding
	for i := range st.Features {
		f := &st.Features[i]
		if f.Stats.Fids == 0 && f.ColumnErrors == 0 {
			var msg string
			switch {
			case st.Rows == 0:
				msg = fmt.Sprintf("feature %q never occurs: the input has no rows", f.Name)
			case f.AbsentRows == st.Rows:
				msg = fmt.Sprintf("feature %q never occurs: none of the %d batches (%d rows) has its column", f.Name, st.Batches, st.Rows)
			default:
				msg = fmt.Sprintf("feature %q never occurs: its column holds no fid in %d rows (absent from %d more)", f.Name, f.SharedRows+f.IndividualRows, f.AbsentRows)
			}
			out = append(out, Finding{Check: CheckOccurrence, Status: Fail, Feature: f.Name, Message: msg})
		}
		if f.ColumnErrors > 0 {
			out = append(out, Finding{Check: CheckColumnType, Status: Fail, Feature: f.Name,
				Message: fmt.Sprintf("feature %q: its column could not be read as fids in %d of %d batches: %s", f.Name, f.ColumnErrors, st.Batches, f.ColumnError)})
		}
		if f.Mismatch > 0 {
			var seen, ex []string
			for _, s := range f.Slots {
				if s.Slot != f.ExpectedSlot {
					seen = append(seen, strconv.Itoa(s.Slot))
				}
			}
			for _, v := range f.Examples {
				ex = append(ex, fidString(v))
			}
			out = append(out, Finding{Check: CheckSlotMismatch, Status: Fail, Feature: f.Name,
				Message: fmt.Sprintf("feature %q: %d of %d fids carry slot %s, but its %s says slot %d (e.g. fid %s)",
					f.Name, f.Mismatch, f.Stats.Fids, strings.Join(seen, ", "), f.SlotSource, f.ExpectedSlot, strings.Join(ex, ", "))})
		} else if f.ExpectedSlot < 0 && len(f.Slots) > 1 {
			var seen []string
			for _, s := range f.Slots {
				seen = append(seen, fmt.Sprintf("%d (%d fids)", s.Slot, s.Fids))
			}
			out = append(out, Finding{Check: CheckSlotMismatch, Status: Warn, Feature: f.Name,
				Message: fmt.Sprintf("feature %q: its fids span %d slots, %s, and no slot is expected (no feature-list entry, no fc_slot_N name)",
					f.Name, len(f.Slots), strings.Join(seen, ", "))})
		}
		if f.SharedRows > 0 && f.IndividualRows > 0 {
			out = append(out, Finding{Check: CheckSharedUse, Status: Warn, Feature: f.Name,
				Message: fmt.Sprintf("feature %q is SHARED in %d rows and INDIVIDUAL in %d rows", f.Name, f.SharedRows, f.IndividualRows)})
		}
	}
	if st.LayoutErrors > 0 {
		out = append(out, Finding{Check: CheckLayout, Status: Fail,
			Message: fmt.Sprintf("the layouts could not run on %d of %d batches: %s", st.LayoutErrors, st.LayoutBatches, st.LayoutError)})
	}
	for _, l := range st.Layouts {
		if l.Failures > 0 {
			out = append(out, Finding{Check: CheckLayout, Status: Fail, Layout: l.Name,
				Message: fmt.Sprintf("layout %q failed on %d of %d batches: %s", l.Name, l.Failures, l.Runs, l.Failure)})
		}
	}
	return out
}

// fidString renders a fid with its slot.
func fidString(v uint64) string {
	return fmt.Sprintf("%#x (slot %d)", v, featurelist.SlotV2(v))
}

// features fills r.Features from the config and the accumulated data.
func (r *Report) features(fc *examplepb.FeatureConfigs, acc *Accumulator) {
	uses := map[string][]string{}
	for _, l := range sortedKeys(fc.GetOutConfigs()) {
		for _, sc := range fc.GetOutConfigs()[l].GetSliceConfigs() {
			u := uses[sc.GetFeatureName()]
			if len(u) == 0 || u[len(u)-1] != l {
				uses[sc.GetFeatureName()] = append(u, l)
			}
		}
	}
	for i, name := range featureNames(fc) {
		f := fc.GetFeatureConfigs()[name]
		fr := FeatureReport{Name: name, Table: f.GetTable(), Pooling: f.GetPoolingType().String(), Dim: featureDim(f),
			Layouts: uses[name], Status: worse(Pass, r.byFeature[name]), ExpectedSlot: -1,
			FidsPerRow: make([]int64, featstats.HistBuckets), Slots: []SlotCount{}, MismatchExamples: []string{}}
		if fr.Layouts == nil {
			fr.Layouts = []string{}
		}
		if acc != nil {
			st := &acc.st.Features[i]
			fr.ExpectedSlot, fr.SlotSource = st.ExpectedSlot, st.SlotSource
			fr.Rows, fr.Fids, fr.RowsWithFids = st.Stats.Rows, st.Stats.Fids, st.Stats.RowsWithFids
			if fr.Rows > 0 {
				fr.Coverage = float64(fr.RowsWithFids) / float64(fr.Rows)
			}
			copy(fr.FidsPerRow, st.Stats.Hist[:])
			fr.Slots = append(fr.Slots, st.Slots...)
			fr.SlotMismatches = st.Mismatch
			for _, v := range st.Examples {
				fr.MismatchExamples = append(fr.MismatchExamples, fmt.Sprintf("%#x", v))
			}
			fr.SharedRows, fr.IndividualRows, fr.AbsentRows = st.SharedRows, st.IndividualRows, st.AbsentRows
		}
		r.Features = append(r.Features, fr)
	}
}

// layouts fills r.Layouts; invalid holds the layouts the static checks failed.
func (r *Report) layouts(fc *examplepb.FeatureConfigs, acc *Accumulator, invalid map[string]bool) {
	ran := map[string]*layoutState{}
	if acc != nil {
		for i := range acc.st.Layouts {
			ran[acc.st.Layouts[i].Name] = &acc.st.Layouts[i]
		}
	}
	for _, name := range sortedKeys(fc.GetOutConfigs()) {
		oc := fc.GetOutConfigs()[name]
		lr := LayoutReport{Name: name, OutType: oc.GetOutType().String(), Shapes: [][]int{}, Status: Skip}
		for _, sh := range oc.GetShape() {
			dims := make([]int, len(sh.GetDims()))
			for j, d := range sh.GetDims() {
				dims[j] = int(d)
			}
			lr.Shapes = append(lr.Shapes, dims)
		}
		switch ls := ran[name]; {
		case ls != nil:
			lr.Runs, lr.Failures, lr.Failure = ls.Runs, ls.Failures, ls.Failure
			lr.Status = Pass
			if ls.Failures > 0 || acc.st.LayoutErrors > 0 {
				lr.Status = Fail
			}
		case invalid[name]:
			lr.Skipped = "invalid config (see the static checks)"
		case acc == nil:
			lr.Skipped = "no data pass"
		default:
			lr.Skipped = acc.st.LayoutSkip
		}
		r.Layouts = append(r.Layouts, lr)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool { return r.Status == Fail }

// Failing returns the findings of status Fail, in check order.
func (r *Report) Failing() []Finding {
	var out []Finding
	for _, c := range r.Checks {
		for _, f := range c.Findings {
			if f.Status == Fail {
				out = append(out, f)
			}
		}
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes a readable summary: the verdict, the inputs, one line per check, one
// line per failing or warning finding (naming its feature, table or layout), and a table of
// the features' data.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	nf, nw := 0, 0
	for _, c := range r.Checks {
		switch c.Status {
		case Fail:
			nf++
		case Warn:
			nw++
		}
	}
	verdict := "PASS"
	switch r.Status {
	case Fail:
		verdict = fmt.Sprintf("FAIL: %d of %d checks failed", nf, len(r.Checks))
		if nw > 0 {
			verdict += fmt.Sprintf(", %d warned", nw)
		}
	case Warn:
		verdict = fmt.Sprintf("PASS with warnings: %d checks warned", nw)
	}
	fmt.Fprintf(&b, "monolith validate: %s\n", verdict)
	fmt.Fprintf(&b, "input:           %s (%d files, %d batches, %d rows)\n", r.Inputs.Pattern, r.Files, r.Batches, r.Rows)
	fmt.Fprintf(&b, "feature configs: %s\n", r.Inputs.FeatureConfigs)
	if r.Inputs.FeatureList != "" {
		fmt.Fprintf(&b, "feature list:    %s\n", r.Inputs.FeatureList)
	}
	fmt.Fprintf(&b, "kernels:         version %d, ps_num %d, unique %t\n\nchecks:\n", r.Version, r.PS, r.Unique)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", strings.ToUpper(string(c.Status)), c.ID, c.Kind, c.Summary)
	}
	tw.Flush()
	var lines []string
	for _, c := range r.Checks {
		for _, f := range c.Findings {
			lines = append(lines, fmt.Sprintf("  %s %s: %s\n", strings.ToUpper(string(f.Status)), f.Check, f.Message))
		}
	}
	if len(lines) > 0 {
		b.WriteString("\nproblems:\n")
		for _, l := range lines {
			b.WriteString(l)
		}
	}
	if len(r.Features) > 0 {
		b.WriteString("\nfeatures:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  STATUS\tFEATURE\tTABLE\tSLOT\tSLOTS SEEN\tFIDS\tCOVERAGE\tMAX FIDS/ROW\tSHARED/INDIVIDUAL/ABSENT ROWS")
		for _, f := range r.Features {
			slot := "-"
			if f.ExpectedSlot >= 0 {
				slot = strconv.Itoa(f.ExpectedSlot)
			}
			var seen []string
			for _, s := range f.Slots {
				seen = append(seen, strconv.Itoa(s.Slot))
			}
			maxB := "-"
			for i := len(f.FidsPerRow) - 1; i >= 0; i-- {
				if f.FidsPerRow[i] > 0 {
					maxB = r.HistBuckets[i]
					break
				}
			}
			table := f.Table
			if table == "" {
				table = "(unset)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%.1f%% (%d/%d)\t%s\t%d/%d/%d\n", strings.ToUpper(string(f.Status)), f.Name, table, slot,
				orDash(strings.Join(seen, ",")), f.Fids, 100*f.Coverage, f.RowsWithFids, f.Rows, maxB, f.SharedRows, f.IndividualRows, f.AbsentRows)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Files returns the paths of the report files in dir: the JSON report, the text summary
// and the HTML report.
func Files(dir string) (jsonPath, textPath, htmlPath string) {
	return filepath.Join(dir, "validate.json"), filepath.Join(dir, "validate.txt"), filepath.Join(dir, "validate.html")
}
