package featurelist

import (
	"fmt"
	"slices"
	"strings"
)

// Len returns the number of distinct features.
func (l *List) Len() int { return len(l.Features) }

// Feature returns the feature stored under key exactly (its feature_name, or its
// normalized name with [KeyByNormalizedName]).
func (l *List) Feature(key string) (*Feature, bool) {
	i, ok := l.features[key]
	if !ok {
		return nil, false
	}
	return l.Features[i], true
}

// Feed returns the feed named name.
func (l *List) Feed(name string) (*Feed, bool) {
	i, ok := l.feeds[name]
	if !ok {
		return nil, false
	}
	return l.Feeds[i], true
}

// Cache returns the cache whose [Cache.Name] is name.
func (l *List) Cache(name string) (*Cache, bool) {
	i, ok := l.caches[name]
	if !ok {
		return nil, false
	}
	return l.Caches[i], true
}

// Lookup finds a feature by name the way the reference's feature_list[name] does: after
// trimming blanks it tries name itself, then "f_"+name, then "fc_"+name, and for names
// with "-" the forms "fc_a-fc_b" and "f_a-f_b". The error wraps [ErrNoFeature].
func (l *List) Lookup(name string) (*Feature, error) {
	name = pyStrip(name)
	for _, key := range candidates(name) {
		if f, ok := l.Feature(key); ok {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%w: %q in %s", ErrNoFeature, name, l.Name)
}

// candidates lists the keys Lookup tries, in order.
func candidates(name string) []string {
	keys := []string{name, "f_" + name, "fc_" + name}
	if strings.Contains(name, "-") {
		terms := strings.Split(name, "-")
		for _, prefix := range []string{"fc_", "f_"} {
			prefixed := make([]string, len(terms))
			for i, t := range terms {
				prefixed[i] = prefix + t
			}
			keys = append(keys, strings.Join(prefixed, "-"))
		}
	}
	return keys
}

// Has reports whether [List.Lookup] would find name.
func (l *List) Has(name string) bool {
	_, err := l.Lookup(name)
	return err == nil
}

// BySlot returns the first feature (in file order) whose slot is slot. Slots are not
// unique (mhy.conf repeats 512, 514 and 515), so this lookup is ambiguous there.
func (l *List) BySlot(slot int) (*Feature, bool) {
	fs := l.slots[slot]
	if len(fs) == 0 {
		return nil, false
	}
	return fs[0], true
}

// FeaturesWithSlot returns every feature whose slot is slot, in file order. The result
// is a new slice.
func (l *List) FeaturesWithSlot(slot int) []*Feature { return slices.Clone(l.slots[slot]) }

// Slots returns the distinct slots in ascending order.
func (l *List) Slots() []int {
	out := make([]int, 0, len(l.slots))
	for s := range l.slots {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// SlotV1 returns the slot of a v1 FID (its top 10 bits).
func SlotV1(fid uint64) int { return int(fid >> 54) }

// SlotV2 returns the slot of a v2 FID (bits 62..48).
func SlotV2(fid uint64) int { return int((fid >> 48) & 0x7FFF) }

// FeaturesForFID returns the features a FID can belong to, as the reference's
// add_feature_by_fids resolves them: first the features without feature_version or with
// version 1 whose slot is [SlotV1](fid), then the version-2 features whose slot is
// [SlotV2](fid). A negative int64 FID is passed as its uint64 bits. The result is nil
// when nothing matches (the reference raises an error then).
func (l *List) FeaturesForFID(fid uint64) []*Feature {
	var out []*Feature
	for _, f := range l.slots[SlotV1(fid)] {
		if v := f.Version(); v == 1 {
			out = append(out, f)
		}
	}
	for _, f := range l.slots[SlotV2(fid)] {
		if f.HasFeatureVersion && f.FeatureVersion == 2 {
			out = append(out, f)
		}
	}
	return out
}
