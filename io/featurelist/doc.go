// Package featurelist parses Monolith feature-list conf files (feature_list.conf, mhy.conf).
//
// It yields typed feeds, features and caches, with lookups by name, slot and FID.
//
// # Format
//
// The format is line oriented (io.md §4.6). Lines are trimmed; blank lines and lines
// starting with "#" are skipped. A line starting with "column_name" lists column names, a
// line starting with "cache_column" declares a Cache, and every other line is a list of
// key=value pairs: the first key is the whole text before the first "=", every later key
// is the last space-separated token before its "=", and a value runs up to the last space
// before the next key (the last one to the end of the line). Values are trimmed and lose
// trailing "," and ";". Lines starting with "feed" become a [Feed], with "cache" a
// [Cache], and all others a [Feature]:
//
//	feed_name=doc_id; shared=true; feature_id=368180
//	feature_name=f_doc_id; depend=doc_id; method=DirectString; slot=200; feature_id=368764
//
// Booleans are true when the lower-cased value is one of true, yes, t, y, 1. List values
// are split on "," with quotes removed from each item. Keys this package does not know
// are kept verbatim in the Extra map of the item. Later items with the same key (feed
// name, feature name or cache name) replace earlier ones but keep the earlier position,
// like the reference's Python dict.
//
// # Reference quirks kept
//
//   - column_name: the names are the text after the first 12 characters
//     (len("column_name:")), split on ",". For "column_name : a, b" (with a space before
//     the colon, as in mhy.conf) the first name is therefore ": a". [List.ColumnNames]
//     keeps that element so results match Monolith; callers that want clean names can
//     use [List.CleanColumnNames].
//   - A value cannot contain "=", and a space must precede every key after the first.
//   - Slot lookups with duplicate slots return the first feature in file order.
//
// # Deviations from the reference (bug fixes)
//
//   - Lines the reference would turn into a nameless item (a feature line without
//     feature_name, a feed without feed_name, a cache without a name) are errors here.
//   - [Feature.NormalizedName] removes a leading "f_" only from terms that start with it;
//     the reference cuts two characters from every non-"fc_" term of a name starting with
//     "f_" (so "f_a-bcd" became "a-d").
//   - [List.FeaturesForFID] reads the v2 slot as (fid>>48)&0x7FFF, the 15-bit slot of
//     io.md §2.1; the reference shifts without masking, which only differs for FIDs with
//     the reserved bit 63 set.
//   - [List.Has] agrees with [List.Lookup] (the reference's "in" skips the "a-b" forms).
//   - Invalid UTF-8 and integers that do not fit in 64 bits are errors.
//   - Parse does not cache per file name; callers keep the *List they need.
//
// Errors name the file and line ([ParseError]). A parsed *List is immutable and safe for
// concurrent use.
package featurelist
