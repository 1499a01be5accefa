// Package filepattern expands training-input specifications into a sorted file list.
//
// It covers globs, file lists, Monolith's DATE/INT templates and gen_patterns date ranges.
//
// # Spec syntax
//
// A spec given to [Expand] is a comma-separated list of elements (commas inside a
// `{...}` placeholder do not split). Surrounding blanks of an element are trimmed and
// empty elements are skipped. Each element is one of:
//
//   - "-": standard input. It passes through unchanged and never touches the file system.
//   - "@path": a file list. Each line names one element (a path, a glob or a template);
//     blank lines and lines starting with "#" are skipped, and relative entries are
//     resolved against the directory of the list file. Nested "@" lists and "-" are
//     rejected inside a list.
//   - a template containing `{DATE(start,end)}` or `{INT(start,end)}` placeholders
//     (Monolith's dataset_input_patterns flag, io.md §3.5.3). ASCII spaces are removed
//     from the element first. DATE with 8-digit bounds enumerates days YYYYMMDD and with
//     10-digit bounds hours YYYYMMDDHH; INT enumerates integers without zero padding; all
//     bounds are inclusive. The cartesian product is formed in placeholder order and a
//     candidate is kept only if its glob matches at least one file. Every brace group must
//     be such a placeholder.
//   - a glob with filepath.Match syntax, plus "**" as a whole path segment, which matches
//     zero or more directories (symbolic links to directories are not followed).
//   - a literal path, which must exist.
//
// Directories are never returned: a glob that matches only directories is an error, as is
// a literal path naming a directory. Every element must contribute at least one file;
// an element that matches nothing is an error that names it (wrapping [ErrNoMatch]),
// never silence. The result is sorted byte-wise and de-duplicated.
//
// # Differences from the reference
//
// Monolith logs and skips a template candidate whose glob fails and asserts only when no
// candidate is left; this package does the same per template, but a plain glob or literal
// path that matches nothing is an error here, where TensorFlow's MatchingFiles would yield
// an empty dataset. Template bounds are validated strictly (digits only; DATE bounds of
// equal length; end not before start), where the reference would produce an empty product
// and fail later. [GenPatterns] takes exactly eight-digit dates and hours 0..23; Python's
// strptime is laxer about digit counts.
//
// Only the local file system is searched; remote schemes such as hdfs:// are not
// supported. All functions are safe for concurrent use.
package filepattern
