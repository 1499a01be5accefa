package featurelist_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fixtures"
	"github.com/monolith-go/monolith/io/featurelist"
)

func parseMHY(t *testing.T, opts ...featurelist.Option) *featurelist.List {
	t.Helper()
	l, err := featurelist.ParseFile(fixtures.Path(t, "mhy.conf"), opts...)
	if err != nil {
		t.Fatalf("ParseFile(mhy.conf): %v", err)
	}
	return l
}

// TestMHYStatistics pins the io.md §6.5 facts about mhy.conf.
func TestMHYStatistics(t *testing.T) {
	l := parseMHY(t)
	check := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v; want %v", what, got, want)
		}
	}

	// Feeds.
	check("feeds", len(l.Feeds), 578)
	shared, minID, maxID := 0, int64(1<<62), int64(-1)
	for _, f := range l.Feeds {
		if f.Shared {
			shared++
		}
		if !f.HasFeatureID {
			t.Errorf("feed %s (line %d) has no feature_id", f.FeedName, f.Line)
		}
		minID, maxID = min(minID, f.FeatureID), max(maxID, f.FeatureID)
		if f.Extra != nil {
			t.Errorf("feed %s has unexpected keys %v", f.FeedName, f.Extra)
		}
	}
	check("shared feeds", shared, 542)
	check("feed feature_id min", minID, int64(368180))
	check("feed feature_id max", maxID, int64(449545))
	check("caches", len(l.Caches), 0)

	// column_name: 578 names equal to the feed names, with the ": area" quirk.
	check("column names", len(l.ColumnNames), 578)
	if len(l.ColumnNames) > 0 {
		check("first column name (quirk)", l.ColumnNames[0], ": area")
	}
	feedNames := make([]string, len(l.Feeds))
	for i, f := range l.Feeds {
		feedNames[i] = f.FeedName
	}
	clean := l.CleanColumnNames()
	if a, b := slices.Sorted(slices.Values(clean)), slices.Sorted(slices.Values(feedNames)); !slices.Equal(a, b) {
		t.Errorf("clean column names differ from feed names (%d vs %d)", len(a), len(b))
	}

	// Features.
	check("features", l.Len(), 1106)
	var (
		v2, withArgs, sharedF, fc, f1, twoDeps int
		methods                                = map[string]int{}
		args                                   = map[string]int{}
		fcSlotMin, fcSlotMax                   = 1 << 30, -1
		fSlotMin, fSlotMax                     = 1 << 30, -1
		fV1                                    int
		fV2                                    []string
		v2SlotMin, v2SlotMax                   = 1 << 30, -1
	)
	minID, maxID = int64(1<<62), int64(-1)
	for _, f := range l.Features {
		if !f.HasSlot || !f.HasFeatureID || f.Method == "" || f.Depend == nil {
			t.Errorf("feature %s (line %d) lacks slot, feature_id, method or depend", f.FeatureName, f.Line)
		}
		minID, maxID = min(minID, f.FeatureID), max(maxID, f.FeatureID)
		if f.Version() == 2 {
			v2++
			v2SlotMin, v2SlotMax = min(v2SlotMin, f.Slot), max(v2SlotMax, f.Slot)
		}
		if f.Args != nil {
			withArgs++
			args[strings.Join(f.Args, ",")]++
		}
		if f.Shared {
			sharedF++
		}
		methods[f.Method]++
		if len(f.Depend) == 2 {
			twoDeps++
			if f.Method != "HasMatch" && f.Method != "TobInstanceProfileMatch" {
				t.Errorf("two-input feature %s has method %s", f.FeatureName, f.Method)
			}
		}
		switch {
		case strings.HasPrefix(f.FeatureName, "fc_"):
			fc++
			if f.Version() != 2 {
				t.Errorf("fc_ feature %s has version %d", f.FeatureName, f.Version())
			}
			fcSlotMin, fcSlotMax = min(fcSlotMin, f.Slot), max(fcSlotMax, f.Slot)
		case strings.HasPrefix(f.FeatureName, "f_"):
			f1++
			fSlotMin, fSlotMax = min(fSlotMin, f.Slot), max(fSlotMax, f.Slot)
			if f.HasFeatureVersion {
				fV2 = append(fV2, f.FeatureName)
				check(f.FeatureName+" version", f.FeatureVersion, 2)
				check(f.FeatureName+" slot", f.Slot, 514)
			} else {
				fV1++
			}
		default:
			t.Errorf("feature %s has neither f_ nor fc_ prefix", f.FeatureName)
		}
	}
	check("v2 features", v2, 1034)
	check("features with args", withArgs, 792)
	check("shared features", sharedF, 590)
	check("fc_ features", fc, 1032)
	check("f_ features", f1, 74)
	check("f_ features without version", fV1, 72)
	slices.Sort(fV2)
	check("f_ v2 features", strings.Join(fV2, ","), "f_goods_is_prepublic,f_user_is_prepublic")
	// io.md §6.5 gives 514..4791 for the fc_ features; that is the range of all v2
	// features (the two f_*_is_prepublic sit at 514). The fc_ features alone use 1200..4791.
	check("fc_ slot range", [2]int{fcSlotMin, fcSlotMax}, [2]int{1200, 4791})
	check("v2 slot range", [2]int{v2SlotMin, v2SlotMax}, [2]int{514, 4791})
	check("f_ slot range", [2]int{fSlotMin, fSlotMax}, [2]int{1, 515})
	check("feature feature_id min", minID, int64(368752))
	check("feature feature_id max", maxID, int64(449546))
	check("two-input depends", twoDeps, 480)
	wantMethods := map[string]int{
		"TobInstanceProfilePairList": 312, "VectorTopString": 248, "HasMatch": 240,
		"TobInstanceProfileMatch": 240, "DirectString": 46, "DirectInt32": 15, "DirectInt64": 5,
	}
	if !maps.Equal(methods, wantMethods) {
		t.Errorf("methods = %v; want %v", methods, wantMethods)
	}
	for a, n := range map[string]int{"10,2": 240, "1,3": 240, "50": 96, "30": 96, "10": 48} {
		check("args "+a, args[a], n)
	}
	if args["1,7,0,1,4,1000,10000"] == 0 {
		t.Errorf("no feature has args 1,7,0,1,4,1000,10000")
	}

	// Slots.
	check("distinct slots", len(l.Slots()), 1102)
	dups := map[int][]string{}
	for _, s := range l.Slots() {
		if fs := l.FeaturesWithSlot(s); len(fs) > 1 {
			for _, f := range fs {
				dups[s] = append(dups[s], f.FeatureName)
			}
			slices.Sort(dups[s])
		}
	}
	wantDups := map[int][]string{
		512: {"f_goods_op_rec_status", "f_goods_quality_score", "f_goods_rec_scene_id"},
		514: {"f_goods_is_prepublic", "f_user_is_prepublic"},
		515: {"f_goods_exposure_cnt_lt", "f_user_quality_score"},
	}
	if !maps.EqualFunc(dups, wantDups, slices.Equal) {
		t.Errorf("duplicate slots = %v; want %v", dups, wantDups)
	}
	// First wins: BySlot returns the earliest definition.
	for s := range wantDups {
		first, ok := l.BySlot(s)
		if !ok || first != l.FeaturesWithSlot(s)[0] {
			t.Errorf("BySlot(%d) = %v; want the first of %v", s, first, dups[s])
		}
		for _, f := range l.FeaturesWithSlot(s)[1:] {
			if f.Line < first.Line {
				t.Errorf("BySlot(%d) = %s (line %d), but %s is on line %d", s, first.FeatureName, first.Line,
					f.FeatureName, f.Line)
			}
		}
	}
}

// TestMHYExampleLines checks every typed field of the two example lines of §6.5.
func TestMHYExampleLines(t *testing.T) {
	l := parseMHY(t)
	docID, ok := l.Feature("f_doc_id")
	if !ok {
		t.Fatal("f_doc_id not found")
	}
	want := featurelist.Feature{
		FeatureName: "f_doc_id", Depend: []string{"doc_id"}, Method: "DirectString",
		Slot: 200, HasSlot: true, FeatureID: 368764, HasFeatureID: true, Line: docID.Line,
	}
	if !equalFeature(docID, &want) {
		t.Errorf("f_doc_id = %+v;\nwant %+v", *docID, want)
	}
	smooth, ok := l.Feature("fc_doc_id_post_praise_1h_smooth")
	if !ok {
		t.Fatal("fc_doc_id_post_praise_1h_smooth not found")
	}
	want = featurelist.Feature{
		FeatureName: "fc_doc_id_post_praise_1h_smooth", Depend: []string{"doc_id_post_praise_1h"},
		Method: "TobInstanceProfilePairList", FeatureVersion: 2, HasFeatureVersion: true,
		Args: []string{"1", "7", "0", "1", "4", "1000", "10000"}, Slot: 4775, HasSlot: true,
		Shared: true, FeatureID: 369835, HasFeatureID: true, Line: smooth.Line,
	}
	if !equalFeature(smooth, &want) {
		t.Errorf("fc_doc_id_post_praise_1h_smooth = %+v;\nwant %+v", *smooth, want)
	}
	if smooth.Line <= docID.Line || docID.Line < 581 {
		t.Errorf("lines: f_doc_id %d, smooth %d; features start after line 580", docID.Line, smooth.Line)
	}
	area, ok := l.Feed("area")
	if !ok || !area.Shared || area.FeatureID != 368235 || area.Line != 1 {
		t.Errorf("feed area = %+v; want shared, feature_id 368235, line 1", area)
	}
}

func equalFeature(a, b *featurelist.Feature) bool {
	return a.FeatureName == b.FeatureName && slices.Equal(a.Depend, b.Depend) && a.Method == b.Method &&
		a.Slot == b.Slot && a.HasSlot == b.HasSlot && slices.Equal(a.Args, b.Args) &&
		a.FeatureVersion == b.FeatureVersion && a.HasFeatureVersion == b.HasFeatureVersion &&
		a.Shared == b.Shared && slices.Equal(a.CacheKeys, b.CacheKeys) && a.NeedRaw == b.NeedRaw &&
		a.FeatureID == b.FeatureID && a.HasFeatureID == b.HasFeatureID &&
		slices.Equal(a.InputOptional, b.InputOptional) && slices.Equal(a.FeatureGroup, b.FeatureGroup) &&
		maps.Equal(a.Extra, b.Extra) && a.Line == b.Line
}

func TestMHYLookups(t *testing.T) {
	l := parseMHY(t)
	tests := []struct{ query, want string }{
		{"f_doc_id", "f_doc_id"},
		{"doc_id", "f_doc_id"}, // f_ before fc_
		{"  doc_id ", "f_doc_id"},
		{"doc_id_post_praise_1h_smooth", "fc_doc_id_post_praise_1h_smooth"},
		{"goods_is_prepublic", "f_goods_is_prepublic"},
	}
	for _, tc := range tests {
		f, err := l.Lookup(tc.query)
		if err != nil || f.FeatureName != tc.want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", tc.query, f, err, tc.want)
		}
		if !l.Has(tc.query) {
			t.Errorf("Has(%q) = false", tc.query)
		}
	}
	if _, err := l.Lookup("no_such_feature"); !errors.Is(err, featurelist.ErrNoFeature) ||
		!strings.Contains(err.Error(), "mhy.conf") {
		t.Errorf("Lookup(no_such_feature) error = %v; want ErrNoFeature naming mhy.conf", err)
	}

	// FID → features: f_doc_id is v1 slot 200, the smooth feature v2 slot 4775.
	docV1 := uint64(200)<<54 | 0x1234
	if fs := l.FeaturesForFID(docV1); len(fs) != 1 || fs[0].FeatureName != "f_doc_id" {
		t.Errorf("FeaturesForFID(v1 slot 200) = %v; want [f_doc_id]", names(fs))
	}
	smoothV2 := uint64(4775)<<48 | 0xabcdef
	if fs := l.FeaturesForFID(smoothV2); len(fs) != 1 || fs[0].FeatureName != "fc_doc_id_post_praise_1h_smooth" {
		t.Errorf("FeaturesForFID(v2 slot 4775) = %v", names(fs))
	}
	// Slot 514 holds only v2 features. A v2 FID of slot 514 finds both of them, after the
	// v1 feature its top ten bits name (514>>6 = slot 8, f_user_city), as the reference does.
	want := []string{"f_user_city", "f_goods_is_prepublic", "f_user_is_prepublic"}
	if fs := l.FeaturesForFID(uint64(514) << 48); !slices.Equal(names(fs), want) {
		t.Errorf("FeaturesForFID(v2 slot 514) = %v; want %v", names(fs), want)
	}
	if fs := l.FeaturesForFID(uint64(514) << 54); len(fs) != 0 {
		t.Errorf("FeaturesForFID(v1 slot 514) = %v; want none", names(fs))
	}
	if fs := l.FeaturesForFID(uint64(1023) << 54); fs != nil {
		t.Errorf("FeaturesForFID(unused slot) = %v; want nil", names(fs))
	}

	// Keying by normalized name.
	n := parseMHY(t, featurelist.KeyByNormalizedName())
	if n.Len() != 1106 {
		t.Errorf("normalized keys: %d features; want 1106 (no collisions)", n.Len())
	}
	if f, ok := n.Feature("doc_id"); !ok || f.FeatureName != "f_doc_id" {
		t.Errorf("normalized Feature(doc_id) = %v", f)
	}
	if _, ok := n.Feature("f_doc_id"); ok {
		t.Errorf("normalized list still keys by feature_name")
	}
}

func names(fs []*featurelist.Feature) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.FeatureName
	}
	return out
}
