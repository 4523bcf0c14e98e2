package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// outputLog is a process's output, both streams in the order they came, on
// disk and bounded: records (a stream tag, a 4-byte length, the bytes) in
// segment files of at most segmentSize bytes, of which the last maxSegments
// are kept. Offsets count output bytes (not record headers) ever written,
// so they stay valid when old segments go. Readers that wait are woken by a
// broadcast on each write and at the end, never by polling.
type outputLog struct {
	dir         string
	segmentSize int64
	maxSegments int

	mu       sync.Mutex
	segments []*logSegment // oldest first
	current  *os.File      // the last segment, open for writing; nil once closed
	end      int64         // the offset after the last byte written
	closed   bool          // no more output will come
	changed  chan struct{} // closed and replaced at each write and at the end
}

// logSegment is one file, named by the offset of its first output byte.
type logSegment struct {
	path  string
	start int64
	size  int64     // file bytes, record headers included
	marks []logMark // where some records start, the first at the file's start: a read seeks to the nearest
}

type logMark struct{ offset, position int64 }

// outputChunk is some bytes of one stream, and the offset after them.
type outputChunk struct {
	stream byte
	data   []byte
	end    int64
}

const (
	recordHeaderSize = 5
	markEvery        = 256 << 10 // file bytes between marks: a read scans at most this to find its offset
	segmentPrefix    = "output."
)

// newOutputLog is an empty log for a process starting now.
func newOutputLog(dir string, segmentSize int64, maxSegments int) *outputLog {
	return &outputLog{dir: dir, segmentSize: segmentSize, maxSegments: maxSegments, changed: make(chan struct{})}
}

// openOutputLog is the log a process left in its directory, closed: nothing will write to it.
func openOutputLog(dir string) (*outputLog, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	log := &outputLog{dir: dir, closed: true, changed: make(chan struct{})}
	for _, entry := range entries {
		start, err := strconv.ParseInt(strings.TrimPrefix(entry.Name(), segmentPrefix), 10, 64)
		if err != nil || !strings.HasPrefix(entry.Name(), segmentPrefix) {
			continue
		}
		log.segments = append(log.segments, &logSegment{path: filepath.Join(dir, entry.Name()), start: start})
	}
	sort.Slice(log.segments, func(i, j int) bool { return log.segments[i].start < log.segments[j].start })
	for _, segment := range log.segments {
		length, err := segment.scan()
		if err != nil {
			return nil, err
		}
		log.end = segment.start + length
	}
	return log, nil
}

// write appends a read of one stream, starting new segments (and dropping the oldest) as it fills them.
func (l *outputLog) write(stream byte, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.broadcast()
	for len(data) > 0 {
		segment, err := l.writableSegment()
		if err != nil {
			return err
		}
		room := l.segmentSize - segment.size - recordHeaderSize
		part := data
		if int64(len(part)) > room {
			part = part[:room]
		}
		if segment.size-segment.marks[len(segment.marks)-1].position >= markEvery {
			segment.marks = append(segment.marks, logMark{offset: l.end, position: segment.size})
		}
		var header [recordHeaderSize]byte
		header[0] = stream
		binary.BigEndian.PutUint32(header[1:], uint32(len(part)))
		if err := l.writeRecord(segment, header[:], part); err != nil {
			return err
		}
		segment.size += recordHeaderSize + int64(len(part))
		l.end += int64(len(part))
		data = data[len(part):]
	}
	return nil
}

func (l *outputLog) writeRecord(segment *logSegment, header, data []byte) error {
	_, err := l.current.Write(header)
	if err == nil {
		_, err = l.current.Write(data)
	}
	if err != nil {
		// No half record may stay: readers trust every header.
		l.current.Truncate(segment.size)
		l.current.Seek(segment.size, io.SeekStart)
		return fmt.Errorf("output log: %w", err)
	}
	return nil
}

// writableSegment is the last segment if a record with a byte fits in it, else a new one.
func (l *outputLog) writableSegment() (*logSegment, error) {
	if l.closed {
		return nil, errors.New("output log: closed")
	}
	if l.current != nil {
		last := l.segments[len(l.segments)-1]
		if last.size+recordHeaderSize < l.segmentSize {
			return last, nil
		}
		l.current.Close()
		l.current = nil
	}
	segment := &logSegment{
		path:  filepath.Join(l.dir, fmt.Sprintf("%s%020d", segmentPrefix, l.end)),
		start: l.end,
		marks: []logMark{{offset: l.end, position: 0}},
	}
	file, err := os.OpenFile(segment.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output log: %w", err)
	}
	l.current = file
	l.segments = append(l.segments, segment)
	if len(l.segments) > l.maxSegments {
		os.Remove(l.segments[0].path)
		l.segments = l.segments[1:]
	}
	return segment, nil
}

// close says no more output will come, and wakes every waiting reader.
func (l *outputLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current != nil {
		l.current.Close()
		l.current = nil
	}
	l.closed = true
	l.broadcast()
}

func (l *outputLog) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// outputRead is what follows an offset.
type outputRead struct {
	chunks  []outputChunk
	next    int64 // where the next read starts
	dropped int64 // bytes skipped because they are no longer kept
	closed  bool  // the log was closed when read: nothing follows what it gave
}

// read is what follows offset, at most limit bytes, adjacent bytes of a
// stream in one chunk. A read from before the oldest kept byte starts there;
// one from past the end reads nothing from the end.
func (l *outputLog) read(offset, limit int64) (outputRead, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	result := outputRead{next: offset, closed: l.closed}
	if offset > l.end {
		result.next = l.end
	}
	if len(l.segments) == 0 {
		return result, nil
	}
	if oldest := l.segments[0].start; result.next < oldest {
		result.dropped = oldest - result.next
		result.next = oldest
	}
	first := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].start > result.next }) - 1
	for _, segment := range l.segments[first:] {
		if limit <= 0 || result.next >= l.end {
			break
		}
		var err error
		if limit, err = segment.read(&result, limit); err != nil {
			return result, err
		}
	}
	return result, nil
}

// wait returns once something follows offset, the log is closed, the time is up or ctx is done.
func (l *outputLog) wait(ctx context.Context, offset int64, timeout time.Duration) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		ready, changed := l.end > offset || l.closed, l.changed
		l.mu.Unlock()
		if ready {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// read adds to result what the segment holds from result.next on, at most
// limit bytes, and returns the limit left.
func (s *logSegment) read(result *outputRead, limit int64) (int64, error) {
	file, err := os.Open(s.path)
	if err != nil {
		return limit, fmt.Errorf("output log: %w", err)
	}
	defer file.Close()
	mark := s.marks[sort.Search(len(s.marks), func(i int) bool { return s.marks[i].offset > result.next })-1]
	records := bufio.NewReaderSize(io.NewSectionReader(file, mark.position, s.size-mark.position), 64<<10)
	at := mark.offset // the offset of the record's first byte
	for limit > 0 {
		stream, length, err := readRecordHeader(records)
		if err == io.EOF {
			return limit, nil
		}
		if err != nil {
			return limit, fmt.Errorf("output log %s: %w", s.path, err)
		}
		skip := result.next - at
		if skip >= length {
			if _, err := records.Discard(int(length)); err != nil {
				return limit, fmt.Errorf("output log %s: %w", s.path, err)
			}
			at += length
			continue
		}
		if skip > 0 {
			if _, err := records.Discard(int(skip)); err != nil {
				return limit, fmt.Errorf("output log %s: %w", s.path, err)
			}
		}
		take := length - skip
		if take > limit {
			take = limit
		}
		data := make([]byte, take)
		if _, err := io.ReadFull(records, data); err != nil {
			return limit, fmt.Errorf("output log %s: %w", s.path, err)
		}
		result.next += take
		limit -= take
		if chunks := result.chunks; len(chunks) > 0 && chunks[len(chunks)-1].stream == stream {
			chunks[len(chunks)-1].data = append(chunks[len(chunks)-1].data, data...)
			chunks[len(chunks)-1].end = result.next
		} else {
			result.chunks = append(result.chunks, outputChunk{stream: stream, data: data, end: result.next})
		}
		if take < length-skip {
			break
		}
		at += length
	}
	return limit, nil
}

// scan reads a segment left on disk: its size, its marks and how many output
// bytes it holds. A record cut short (the agent died writing it) is left out.
func (s *logSegment) scan() (int64, error) {
	file, err := os.Open(s.path)
	if err != nil {
		return 0, fmt.Errorf("output log: %w", err)
	}
	defer file.Close()
	records := bufio.NewReaderSize(file, 64<<10)
	s.marks = []logMark{{offset: s.start, position: 0}}
	var length int64
	for {
		_, recordLength, err := readRecordHeader(records)
		if err != nil {
			return length, nil // the end, or a header cut short
		}
		if discarded, _ := records.Discard(int(recordLength)); int64(discarded) < recordLength {
			return length, nil
		}
		length += recordLength
		s.size += recordHeaderSize + recordLength
		if s.size-s.marks[len(s.marks)-1].position >= markEvery {
			s.marks = append(s.marks, logMark{offset: s.start + length, position: s.size})
		}
	}
}

func readRecordHeader(records *bufio.Reader) (stream byte, length int64, err error) {
	var header [recordHeaderSize]byte
	if _, err := io.ReadFull(records, header[:]); err != nil {
		return 0, 0, err
	}
	return header[0], int64(binary.BigEndian.Uint32(header[1:])), nil
}
