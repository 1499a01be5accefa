package validate

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// Geometry of the per-feature charts, in pixels.
const (
	chartBarW   = 34
	chartGap    = 6
	chartPlotH  = 110
	chartTop    = 16 // room for the count above the tallest bar
	chartLabelH = 18
	coverageW   = 240
)

// htmlView is what the template renders.
type htmlView struct {
	R        *Report
	Verdict  string
	Problems []Finding
	Features []htmlFeature
}

type htmlFeature struct {
	F           FeatureReport
	Index       int
	Slot        string
	SlotsSeen   string
	CoveragePct string
	CoverageW   int
	CoverageMax int
	ChartW      int
	ChartH      int
	AxisY       int
	Bars        []htmlBar
	Alt         string
}

type htmlBar struct {
	X, Y, W, H   int
	CX           int // centre, for labels
	LabelY       int
	CountY       int
	Label, Count string
}

// WriteHTML writes a self-contained HTML report (inline CSS and SVG, no scripts or external
// assets): the verdict, every check, every problem, and per feature its fids-per-row
// histogram and coverage. The markup is also well-formed XML.
func (r *Report) WriteHTML(w io.Writer) error {
	v := htmlView{R: r, Verdict: strings.ToUpper(string(r.Status))}
	for _, c := range r.Checks {
		v.Problems = append(v.Problems, c.Findings...)
	}
	for i, f := range r.Features {
		hf := htmlFeature{F: f, Index: i, Slot: "none", SlotsSeen: "none", CoverageMax: coverageW}
		if f.ExpectedSlot >= 0 {
			hf.Slot = fmt.Sprintf("%d (from its %s)", f.ExpectedSlot, f.SlotSource)
		}
		if len(f.Slots) > 0 {
			var s []string
			for _, sc := range f.Slots {
				s = append(s, fmt.Sprintf("%d (%d fids)", sc.Slot, sc.Fids))
			}
			hf.SlotsSeen = strings.Join(s, ", ")
		}
		hf.CoveragePct = fmt.Sprintf("%.1f%%", 100*f.Coverage)
		hf.CoverageW = int(f.Coverage*coverageW + 0.5)
		// Buckets up to the last non-empty one (at least "0" and "1").
		n := 2
		var most int64
		for b, c := range f.FidsPerRow {
			if c > 0 {
				n = max(n, b+1)
			}
			most = max(most, c)
		}
		hf.ChartW = n*(chartBarW+chartGap) + chartGap
		hf.AxisY = chartTop + chartPlotH
		hf.ChartH = hf.AxisY + chartLabelH
		var alt []string
		for b := 0; b < n; b++ {
			c := f.FidsPerRow[b]
			h := 0
			if most > 0 {
				h = int(float64(c)/float64(most)*chartPlotH + 0.5)
			}
			if c > 0 && h == 0 {
				h = 1
			}
			x := chartGap + b*(chartBarW+chartGap)
			hf.Bars = append(hf.Bars, htmlBar{X: x, Y: hf.AxisY - h, W: chartBarW, H: h, CX: x + chartBarW/2,
				LabelY: hf.AxisY + 13, CountY: hf.AxisY - h - 3, Label: r.HistBuckets[b], Count: fmt.Sprint(c)})
			alt = append(alt, fmt.Sprintf("%s fids: %d rows", r.HistBuckets[b], c))
		}
		hf.Alt = "fids per row of " + f.Name + ": " + strings.Join(alt, "; ")
		v.Features = append(v.Features, hf)
	}
	return htmlTemplate.Execute(w, v)
}

// statusClass maps a status to its CSS class.
func statusClass(s Status) string { return "st-" + string(s) }

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"class": statusClass,
	"upper": func(s Status) string { return strings.ToUpper(string(s)) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>monolith validate: {{.Verdict}} ({{.R.Inputs.FeatureConfigs}})</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2330; background: #fafbfc; }
h1 { font-size: 22px; margin: 0 0 8px 0; }
h2 { font-size: 18px; margin: 28px 0 8px 0; }
table { border-collapse: collapse; background: #fff; }
th, td { text-align: left; padding: 4px 10px; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
th { background: #f0f2f5; }
code { font: 12px ui-monospace, monospace; }
.badge { display: inline-block; min-width: 40px; text-align: center; padding: 1px 6px; border-radius: 4px; font-weight: 600; font-size: 12px; color: #fff; }
.st-pass { background: #2e7d32; }
.st-fail { background: #c62828; }
.st-warn { background: #b26a00; }
.st-skip { background: #78808a; }
.meta td:first-child { color: #5b6470; }
.cards { display: flex; flex-wrap: wrap; gap: 14px; }
.card { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 10px 12px; width: 380px; }
.card h3 { font-size: 15px; margin: 0 0 6px 0; word-break: break-all; }
.card dl { display: grid; grid-template-columns: 110px 1fr; margin: 0 0 8px 0; font-size: 12px; }
.card dt { color: #5b6470; }
.card dd { margin: 0; word-break: break-word; }
svg text { font: 10px system-ui, sans-serif; fill: #3b4350; }
.bar { fill: #3f6fb5; }
.cov-bg { fill: #e3e6ea; }
.cov-fg { fill: #2e7d32; }
.axis { stroke: #9aa2ad; stroke-width: 1; }
</style>
</head>
<body>
<h1>monolith validate: <span class="badge {{class .R.Status}}">{{.Verdict}}</span></h1>
<table class="meta">
<tr><td>input</td><td><code>{{.R.Inputs.Pattern}}</code> ({{.R.Files}} files, {{.R.Batches}} batches, {{.R.Rows}} rows)</td></tr>
<tr><td>feature configs</td><td><code>{{.R.Inputs.FeatureConfigs}}</code></td></tr>
{{- if .R.Inputs.FeatureList}}
<tr><td>feature list</td><td><code>{{.R.Inputs.FeatureList}}</code></td></tr>
{{- end}}
<tr><td>kernels</td><td>version {{.R.Version}}, ps_num {{.R.PS}}, unique {{.R.Unique}}</td></tr>
</table>

<h2>Checks</h2>
<table>
<tr><th>status</th><th>check</th><th>kind</th><th>what it checks</th><th>result</th></tr>
{{- range .R.Checks}}
<tr><td><span class="badge {{class .Status}}">{{upper .Status}}</span></td><td><code>{{.ID}}</code></td><td>{{.Kind}}</td><td>{{.Title}}</td><td>{{.Summary}}</td></tr>
{{- end}}
</table>

<h2>Problems</h2>
{{- if .Problems}}
<table>
<tr><th>status</th><th>check</th><th>subject</th><th>message</th></tr>
{{- range .Problems}}
<tr><td><span class="badge {{class .Status}}">{{upper .Status}}</span></td><td><code>{{.Check}}</code></td><td>{{if .Layout}}layout <code>{{.Layout}}</code>{{if .Slice}} slice {{.Slice}}{{end}} {{end}}{{if .Feature}}feature <code>{{.Feature}}</code> {{end}}{{if .Table}}table <code>{{.Table}}</code>{{end}}</td><td>{{.Message}}</td></tr>
{{- end}}
</table>
{{- else}}
<p>None.</p>
{{- end}}

<h2>Layouts</h2>
<table>
<tr><th>status</th><th>layout</th><th>out type</th><th>declared shapes</th><th>batches run</th><th>failures</th><th>note</th></tr>
{{- range .R.Layouts}}
<tr><td><span class="badge {{class .Status}}">{{upper .Status}}</span></td><td><code>{{.Name}}</code></td><td>{{.OutType}}</td><td><code>{{.Shapes}}</code></td><td>{{.Runs}}</td><td>{{.Failures}}</td><td>{{.Failure}}{{.Skipped}}</td></tr>
{{- end}}
</table>

<h2>Features</h2>
<p>Fids per row: rows whose feature holds 0, 1, 2-3, 4-7, ... fids. Coverage: rows holding at least one fid.</p>
<div class="cards">
{{- range .Features}}
<div class="card" id="feature-{{.Index}}">
<h3><span class="badge {{class .F.Status}}">{{upper .F.Status}}</span> {{.F.Name}}</h3>
<dl>
<dt>table</dt><dd>{{if .F.Table}}<code>{{.F.Table}}</code>{{else}}(unset){{end}}, {{.F.Pooling}}, dim {{.F.Dim}}</dd>
<dt>layouts</dt><dd>{{range $i, $l := .F.Layouts}}{{if $i}}, {{end}}<code>{{$l}}</code>{{else}}none{{end}}</dd>
<dt>expected slot</dt><dd>{{.Slot}}</dd>
<dt>slots seen</dt><dd>{{.SlotsSeen}}{{if .F.SlotMismatches}}; {{.F.SlotMismatches}} fids off-slot{{end}}</dd>
<dt>fids</dt><dd>{{.F.Fids}} in {{.F.Rows}} rows</dd>
<dt>rows</dt><dd>{{.F.SharedRows}} shared, {{.F.IndividualRows}} individual, {{.F.AbsentRows}} absent</dd>
</dl>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.CoverageMax}}" height="34" role="img" aria-label="coverage {{.CoveragePct}}">
<title>coverage of {{.F.Name}}: {{.CoveragePct}} ({{.F.RowsWithFids}} of {{.F.Rows}} rows)</title>
<rect class="cov-bg" x="0" y="0" width="{{.CoverageMax}}" height="16" rx="3"/>
<rect class="cov-fg" x="0" y="0" width="{{.CoverageW}}" height="16" rx="3"/>
<text x="0" y="30">coverage {{.CoveragePct}} ({{.F.RowsWithFids}}/{{.F.Rows}} rows)</text>
</svg>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.ChartW}}" height="{{.ChartH}}" role="img" aria-label="{{.Alt}}">
<title>{{.Alt}}</title>
<line class="axis" x1="0" y1="{{.AxisY}}" x2="{{.ChartW}}" y2="{{.AxisY}}"/>
{{- range .Bars}}
<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/>
<text x="{{.CX}}" y="{{.CountY}}" text-anchor="middle">{{.Count}}</text>
<text x="{{.CX}}" y="{{.LabelY}}" text-anchor="middle">{{.Label}}</text>
{{- end}}
</svg>
</div>
{{- end}}
</div>
</body>
</html>
`))
