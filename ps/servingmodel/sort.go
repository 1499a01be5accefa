package servingmodel

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// sortBudget is the bytes of rows a table's export (and Verify) sorts in memory; a larger
// table is sorted in runs of that size, spilled to temporary files and merged.
const sortBudget = 64 << 20

// recordSorter gives back fixed-size records in ascending order of their first 8 bytes, a
// little-endian fid, as an unsigned number (the order serving's loader indexes): up to a
// budget of bytes in memory, beyond it in sorted runs spilled to temporary files and
// merged.
type recordSorter struct {
	size         int    // bytes of a record
	limit        int    // bytes of buf before a spill
	buf          []byte // records not yet spilled
	dir, pattern string // where spill files go (os.CreateTemp)
	runs         []string
}

// newRecordSorter sorts records of size bytes, about hint of them, holding at most budget
// bytes of them in memory (at least one record), spilling into files that
// os.CreateTemp(dir, pattern) makes.
func newRecordSorter(size, budget int, hint uint64, dir, pattern string) *recordSorter {
	limit := max(1, budget/size) * size
	return &recordSorter{size: size, limit: limit, buf: make([]byte, 0, min(uint64(limit), hint*uint64(size))),
		dir: dir, pattern: pattern}
}

// add copies rec (size bytes) in.
func (s *recordSorter) add(rec []byte) error {
	if len(s.buf)+s.size > s.limit {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.buf = append(s.buf, rec...)
	return nil
}

// spill writes the records held, sorted, to a new run file.
func (s *recordSorter) spill() (err error) {
	sort.Sort(records{s.buf, s.size, make([]byte, s.size)})
	f, err := os.CreateTemp(s.dir, s.pattern)
	if err != nil {
		return fmt.Errorf("sort spill: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("sort spill: %w", cerr)
		}
	}()
	if _, err := f.Write(s.buf); err != nil {
		return fmt.Errorf("sort spill: %w", err)
	}
	s.buf = s.buf[:0]
	return nil
}

// each calls fn with every record added, in order (rec valid until fn returns).
func (s *recordSorter) each(fn func(rec []byte) error) error {
	if len(s.runs) == 0 {
		sort.Sort(records{s.buf, s.size, make([]byte, s.size)})
		for off := 0; off < len(s.buf); off += s.size {
			if err := fn(s.buf[off : off+s.size]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.buf = nil
	m := make(merge, 0, len(s.runs))
	defer func() {
		for _, r := range m {
			r.f.Close()
		}
	}()
	for _, name := range s.runs {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("sort merge: %w", err)
		}
		r := &run{f: f, r: bufio.NewReaderSize(f, 32<<10), rec: make([]byte, s.size)}
		m = append(m, r)
		if ok, err := r.next(); err != nil {
			return err
		} else if !ok {
			m = m[:len(m)-1]
			f.Close()
		}
	}
	heap.Init(&m)
	for len(m) > 0 {
		r := m[0]
		if err := fn(r.rec); err != nil {
			return err
		}
		ok, err := r.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&m, 0)
		} else {
			r.f.Close()
			heap.Pop(&m)
		}
	}
	return nil
}

// close removes the spill files.
func (s *recordSorter) close() error {
	var errs []error
	for _, name := range s.runs {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.runs, s.buf = nil, nil
	return errors.Join(errs...)
}

// fidOf is the fid at the head of a record, as an unsigned number.
func fidOf(rec []byte) uint64 { return binary.LittleEndian.Uint64(rec) }

// records sorts records of size bytes in b by fid, in place.
type records struct {
	b    []byte
	size int
	tmp  []byte // one record
}

func (r records) Len() int { return len(r.b) / r.size }
func (r records) Less(i, j int) bool {
	return fidOf(r.b[i*r.size:]) < fidOf(r.b[j*r.size:])
}
func (r records) Swap(i, j int) {
	a, b := r.b[i*r.size:(i+1)*r.size], r.b[j*r.size:(j+1)*r.size]
	copy(r.tmp, a)
	copy(a, b)
	copy(b, r.tmp)
}

// run is one spilled run being merged: its current record.
type run struct {
	f   *os.File
	r   *bufio.Reader
	rec []byte
}

// next reads the run's next record; ok is false at its end.
func (r *run) next() (ok bool, err error) {
	switch _, err := io.ReadFull(r.r, r.rec); {
	case err == io.EOF:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sort merge: %s: %w", r.f.Name(), err)
	}
	return true, nil
}

// merge is a min-heap of runs by their current record's fid (container/heap).
type merge []*run

func (m merge) Len() int           { return len(m) }
func (m merge) Less(i, j int) bool { return fidOf(m[i].rec) < fidOf(m[j].rec) }
func (m merge) Swap(i, j int)      { m[i], m[j] = m[j], m[i] }
func (m *merge) Push(x any)        { *m = append(*m, x.(*run)) }
func (m *merge) Pop() any {
	old := *m
	r := old[len(old)-1]
	*m = old[:len(old)-1]
	return r
}
